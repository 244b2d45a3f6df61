"""The Dockerfile, .dockerignore and every image reference: pinned, non-root, consistent with pyproject."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path

import pytest

from service.api.settings import ApiSettings
from tests.deploy.deployfiles import (
    DOCKERIGNORE,
    ROOT,
    DockerInstruction,
    compose_ragmon_containers,
    compose_services,
    dockerfile_instructions,
    env_names,
    image_name_and_tag,
    k8s_objects,
    k8s_ragmon_containers,
    kustomization,
)
from workers.runtime.settings import WorkerSettings

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _pinned(image: str) -> bool:
    _name, tag = image_name_and_tag(image)
    return "@sha256:" in image or (tag is not None and tag != "latest" and re.search(r"\d", tag) is not None)


def all_image_references() -> list[tuple[str, str]]:
    refs = [(f"compose service {n}", s["image"]) for n, s in compose_services().items()]
    for obj in k8s_objects():
        spec = obj.get("spec", {}).get("template", {}).get("spec", {})
        for c in spec.get("initContainers", []) + spec.get("containers", []):
            refs.append((f"k8s {obj['kind']} {obj['metadata']['name']}", c["image"]))
    return refs


def test_every_image_is_pinned_to_a_version() -> None:
    refs = all_image_references()
    assert len(refs) >= 10
    for where, image in refs:
        assert _pinned(image), f"{where}: {image!r} is not pinned to a version tag"


def test_the_ragmon_image_tag_is_the_package_version() -> None:
    for container in compose_ragmon_containers() + k8s_ragmon_containers():
        image = container.raw.get("image") or container.raw["container"]["image"]
        assert image == f"ragmon:{VERSION}", f"{container.where}: {image}"
    (override,) = [i for i in kustomization()["images"] if i["name"] == "ragmon"]
    assert override["newTag"] == VERSION


def _global_args() -> dict[str, str]:
    """ARG defaults declared before the first FROM (the ones a FROM line can use)."""
    args = {}
    for i in dockerfile_instructions():
        if i.keyword == "ARG" and i.stage == -1 and "=" in i.args:
            name, value = i.args.split("=", 1)
            args[name] = value
    return args


def _expand(text: str) -> str:
    args = _global_args()
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), text)


def _final_stage() -> list[DockerInstruction]:
    instructions = dockerfile_instructions()
    last = max(i.stage for i in instructions)
    return [i for i in instructions if i.stage == last]


def test_dockerfile_base_images_are_pinned_and_match_requires_python() -> None:
    stages: list[str] = []
    for i in dockerfile_instructions():
        if i.keyword != "FROM":
            continue
        image, *alias = _expand(i.args).split()
        if image not in stages:
            assert _pinned(image), f"FROM {image} is not pinned"
            tag = image_name_and_tag(image)[1] or ""
            # the image runs the lowest Python ragmon declares, the one the test suite runs on
            minor = re.search(r">=3\.(\d+)", PYPROJECT["project"]["requires-python"])
            assert minor and tag.startswith(f"3.{int(minor.group(1))}."), f"{image} vs requires-python"
        if alias:
            stages.append(alias[-1])


def test_dockerfile_runs_as_a_non_root_user_that_matches_the_k8s_security_context() -> None:
    users = [i.args for i in _final_stage() if i.keyword == "USER"]
    assert users, "the runtime stage has no USER: it would run as root"
    user = users[-1].split(":")[0]
    assert user.isdigit(), "a numeric USER lets Kubernetes verify runAsNonRoot"
    assert user not in ("0", "root")
    for container in k8s_ragmon_containers():
        pod = container.raw["deployment"]["spec"]["template"]["spec"]["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == int(user), container.where


def test_dockerfile_pins_cpu_torch_before_installing_the_ml_extra() -> None:
    ml = PYPROJECT["project"]["optional-dependencies"]["ml"]
    (torch_pin,) = [r.replace(" ", "") for r in ml if re.match(r"torch\b", r)]
    assert torch_pin == "torch==2.13.0"
    runs = [i for i in dockerfile_instructions() if i.keyword == "RUN"]
    torch_runs = [
        n for n, i in enumerate(runs) if re.search(rf"pip install {re.escape(torch_pin)}\s", i.args + " ")
    ]
    assert torch_runs, f"no RUN pip install {torch_pin}"
    assert TORCH_CPU_INDEX in runs[torch_runs[0]].args, (
        "torch must come from the CPU index, or CUDA wheels are pulled"
    )
    ml_runs = [
        n for n, i in enumerate(runs) if re.search(r"pip install (?:--?[\w-]+ \S+ )*\"?\.\[ml\]", i.args)
    ]
    assert ml_runs and ml_runs[0] > torch_runs[0], "install CPU torch first, then .[ml] (which then keeps it)"


def test_dockerfile_entrypoint_is_the_console_script() -> None:
    assert PYPROJECT["project"]["scripts"]["ragmon"] == "service.cli:main"
    (entrypoint,) = [i for i in _final_stage() if i.keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint.args) == ["ragmon"]


def _env() -> dict[str, str]:
    env: dict[str, str] = {}
    for i in _final_stage():
        if i.keyword == "ENV":
            for name, value in re.findall(r"(\w+)=(\S+)", i.args):
                env[name] = value
    return env


def test_dockerfile_env_and_expose_match_the_code() -> None:
    env = _env()
    known = env_names(ApiSettings) | env_names(WorkerSettings)
    for name in env:
        if name.startswith("RAGMON_"):
            assert name in known, f"ENV {name} is not a setting"
    exposed = {int(p.split("/")[0]) for i in _final_stage() if i.keyword == "EXPOSE" for p in i.args.split()}
    assert exposed == {ApiSettings.model_fields["api_port"].default, int(env["RAGMON_WORKER_METRICS_PORT"])}
    assert env["RAGMON_WORKER_METRICS_HOST"] == "0.0.0.0"


def test_caches_the_image_writes_to_are_writable_in_k8s() -> None:
    """readOnlyRootFilesystem: HF_HOME must be under an emptyDir mount of every ragmon container."""
    hf_home = Path(_env()["HF_HOME"])
    for container in k8s_ragmon_containers():
        volumes = {v["name"]: v for v in container.raw["deployment"]["spec"]["template"]["spec"]["volumes"]}
        writable = [
            m["mountPath"]
            for m in container.raw["container"]["volumeMounts"]
            if "emptyDir" in volumes[m["name"]] and not m.get("readOnly")
        ]
        assert any(hf_home.is_relative_to(w) for w in writable), f"{container.where}: {hf_home} is read-only"


def _dockerignore_patterns() -> list[str]:
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def _ignored(path: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    ignored = False
    for pattern in _dockerignore_patterns():
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        forms = {pattern, pattern.removeprefix("**/")}
        if any(fnmatch.fnmatchcase(c, f) for c in candidates for f in forms):
            ignored = not negate
    return ignored


def test_dockerignore_keeps_what_the_build_copies_and_drops_the_rest() -> None:
    copied = [
        src
        for i in dockerfile_instructions()
        if i.keyword == "COPY" and "--from" not in i.args
        for src in i.args.split()[:-1]
    ]
    assert copied
    for src in copied:
        assert (ROOT / src).exists(), f"COPY {src}: not in the repository"
        assert not _ignored(src), f"COPY {src}: excluded by .dockerignore"
    for package in ("service", "workers"):
        for path in (ROOT / package).rglob("*"):
            rel = path.relative_to(ROOT).as_posix()
            if path.is_file() and "__pycache__" not in rel:
                assert not _ignored(rel), f"{rel} would be missing from the build context"
    for heavy in (
        ".venv/bin/python",
        ".git/HEAD",
        "tests/conftest.py",
        ".ragmon/logs/api.log",
        "service/__pycache__/cli.cpython-311.pyc",
        "dashboards/overview.json",
    ):
        assert _ignored(heavy), f"{heavy} would be sent to the Docker daemon"


@pytest.mark.parametrize("package", ["service", "workers"])
def test_files_the_code_reads_are_installed_with_it(package: str) -> None:
    """The image installs the package without -e: non-Python files need package-data, or they are left out.

    (setuptools without a VCS plugin or MANIFEST.in puts only *.py and declared package-data in the wheel.)
    """
    declared = PYPROJECT.get("tool", {}).get("setuptools", {}).get("package-data", {})
    missing = []
    for path in sorted((ROOT / package).rglob("*")):
        if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
            continue
        covered = False
        for pkg, globs in declared.items():
            base = ROOT if pkg == "*" else ROOT / Path(*pkg.split("."))
            if pkg == "*" or path.is_relative_to(base):
                rel = path.relative_to(base if pkg != "*" else path.parent).as_posix()
                covered |= any(fnmatch.fnmatchcase(rel, g) for g in globs)
        if not covered:
            missing.append(path.relative_to(ROOT).as_posix())
    assert not missing, (
        f"not in [tool.setuptools.package-data], so not in the image: {missing} "
        '(e.g. "service.simulate" = ["scenarios/*.yaml"])'
    )
