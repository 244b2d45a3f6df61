"""The `ragmon` commands, environment variables and config files of compose and Kubernetes match the code."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from service.api.settings import ApiSettings
from service.cli import build_parser
from service.contracts.config import CONFIG_ENV
from service.local.discovery import worker_names
from service.simulate.cli import build_parser as build_simulate_parser
from tests.deploy.deployfiles import (
    ROOT,
    RagmonContainer,
    all_ragmon_containers,
    compose,
    compose_bind_mounts,
    compose_ragmon_containers,
    compose_services,
    dockerfile_instructions,
    env_names,
    k8s_named,
    k8s_ragmon_containers,
)
from workers.drift.config import DriftConfig
from workers.evaluations.settings import EvaluationsSettings
from workers.exclusion.config import ExclusionConfig
from workers.faithfulness.config import SECTION as FAITHFULNESS_SECTION
from workers.faithfulness.config import FaithfulnessConfig
from workers.forwarder.settings import ForwarderSettings
from workers.metrics.config import MetricsConfig
from workers.phoenix.settings import PhoenixSettings
from workers.runtime.settings import WorkerSettings
from workers.shadow.config import ShadowConfig

CONFIG_SECTIONS: dict[str, type[BaseModel]] = {
    "metrics": MetricsConfig,
    FAITHFULNESS_SECTION: FaithfulnessConfig,
    "exclusion": ExclusionConfig,
    "drift": DriftConfig,
    "shadow": ShadowConfig,
}


def simulator_env_names() -> set[str]:
    """RAGMON_* names the simulator's code reads (string constants in service/simulate)."""
    names = set()
    for path in (ROOT / "service" / "simulate").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("RAGMON_")
            ):
                names.add(node.value)
    return names


def allowed_env(role: str) -> set[str]:
    workers = env_names(WorkerSettings) | env_names(PhoenixSettings) | env_names(ForwarderSettings)
    workers |= env_names(EvaluationsSettings)
    by_role = {"api": env_names(ApiSettings), "worker": workers, "simulate": simulator_env_names()}
    return by_role[role] | {CONFIG_ENV}


CONTAINERS = all_ragmon_containers()
IDS = [c.where for c in CONTAINERS]


def test_containers_found() -> None:
    roles = {(c.where.split()[0], c.role) for c in CONTAINERS}
    assert {("compose", "api"), ("compose", "worker"), ("k8s", "api"), ("k8s", "worker")} <= roles


@pytest.mark.parametrize("container", CONTAINERS, ids=IDS)
def test_command_is_a_real_ragmon_command(container: RagmonContainer) -> None:
    try:
        args = build_parser().parse_args(container.argv)
    except SystemExit as exc:
        pytest.fail(f"{container.where}: `ragmon {' '.join(container.argv)}` is rejected by the CLI ({exc})")
    if args.command == "worker":
        assert args.name in worker_names(), f"{container.where}: no worker named {args.name!r}"
    elif args.command == "simulate":
        try:
            build_simulate_parser().parse_args(args.rest)
        except SystemExit as exc:
            pytest.fail(f"{container.where}: `ragmon simulate {' '.join(args.rest)}` is rejected ({exc})")
    else:
        assert args.command == "api", (
            f"{container.where}: unexpected role {args.command!r} in a long-running container"
        )


def test_dockerfile_default_command_is_a_real_ragmon_command() -> None:
    import json

    (entrypoint,) = [i for i in dockerfile_instructions() if i.keyword == "ENTRYPOINT"]
    (cmd,) = [i for i in dockerfile_instructions() if i.keyword == "CMD"]
    assert json.loads(entrypoint.args) == ["ragmon"]
    assert build_parser().parse_args(json.loads(cmd.args)).command == "api"


def test_compose_and_k8s_run_exactly_the_workers_on_disk() -> None:
    expected = worker_names()
    assert expected, "service.local.discovery.worker_names() found no worker"
    for source, containers in (("compose", compose_ragmon_containers()), ("k8s", k8s_ragmon_containers())):
        running = sorted(c.argv[1] for c in containers if c.role == "worker")
        assert running == expected, f"{source} runs workers {running}; the code has {expected}"


@pytest.mark.parametrize("container", CONTAINERS, ids=IDS)
def test_env_vars_are_real_settings(container: RagmonContainer) -> None:
    allowed = allowed_env(container.role)
    for name in container.env:
        if name.startswith("OTEL_"):
            continue
        assert name.startswith("RAGMON_"), f"{container.where}: {name} is neither a RAGMON_ setting nor OTEL_"
        assert name in allowed, (
            f"{container.where}: {name} is not read by `ragmon {container.role}` "
            f"(settings class fields, {CONFIG_ENV}); it would be ignored silently"
        )


@pytest.mark.parametrize(
    "container",
    [c for c in CONTAINERS if c.role in ("api", "worker")],
    ids=[c.where for c in CONTAINERS if c.role in ("api", "worker")],
)
def test_env_values_validate_as_settings(container: RagmonContainer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The values, not only the names: a port typo or a bad partition count fails here, not at start-up."""
    import os

    for name in list(os.environ):
        if name.startswith("RAGMON_"):
            monkeypatch.delenv(name)
    for name, value in container.env.items():
        if value != "<valueFrom>":
            monkeypatch.setenv(name, value)
    if container.role == "worker":
        WorkerSettings()
        PhoenixSettings()
        ForwarderSettings().header_map()
    else:
        # the key file is a Secret mounted in the pod; its path is checked against the mount elsewhere
        ApiSettings(api_keys_file=None)


def _config_texts() -> dict[str, str]:
    return {
        "compose configs.ragmon-config": compose()["configs"]["ragmon-config"]["content"],
        "k8s ConfigMap ragmon-config": k8s_named("ConfigMap", "ragmon-config")["data"]["ragmon.yaml"],
    }


@pytest.mark.parametrize("where", list(_config_texts()))
def test_config_file_validates_section_by_section(where: str) -> None:
    data = yaml.safe_load(_config_texts()[where])
    assert isinstance(data, dict)
    unknown = set(data) - set(CONFIG_SECTIONS)
    assert not unknown, f"{where}: sections no worker reads: {sorted(unknown)}"
    for section, model in CONFIG_SECTIONS.items():
        model.model_validate(data.get(section) or {})


def _faithfulness_model_paths(text: str) -> list[str]:
    section: dict[str, Any] = yaml.safe_load(text)[FAITHFULNESS_SECTION]
    return [section["model"], section["foundation"]]


def test_compose_workers_see_the_config_file_and_the_models() -> None:
    mounted = {c["target"] for c in compose_services()["worker-metrics"]["configs"]}
    for container in compose_ragmon_containers():
        if container.role != "worker":
            continue
        targets = {c["target"] for c in container.raw.get("configs", [])}
        assert container.env[CONFIG_ENV] in targets, (
            f"{container.where}: {CONFIG_ENV} is not where the config is"
        )
    assert len(mounted) == 1
    faithfulness = compose_services()["worker-faithfulness"]
    model_targets = [t for _, t in compose_bind_mounts(faithfulness)]
    for path in _faithfulness_model_paths(_config_texts()["compose configs.ragmon-config"]):
        assert any(Path(path).is_relative_to(t) for t in model_targets), (
            f"{path} is not under a mounted volume"
        )


def _volume_mounts(container: RagmonContainer) -> dict[str, str]:
    """mountPath -> the volume's source (ConfigMap, Secret or PVC name) of a k8s container."""
    volumes = {
        v["name"]: v for v in container.raw["deployment"]["spec"]["template"]["spec"].get("volumes", [])
    }
    out = {}
    for mount in container.raw["container"].get("volumeMounts", []):
        volume = volumes[mount["name"]]
        source = (
            volume.get("configMap", {}).get("name")
            or volume.get("secret", {}).get("secretName")
            or volume.get("persistentVolumeClaim", {}).get("claimName")
            or "emptyDir"
        )
        out[mount["mountPath"]] = source
    return out


def test_k8s_workers_see_the_config_file_and_the_models() -> None:
    text = _config_texts()["k8s ConfigMap ragmon-config"]
    for container in k8s_ragmon_containers():
        mounts = _volume_mounts(container)
        if container.role != "worker":
            continue
        config = Path(container.env[CONFIG_ENV])
        assert mounts.get(str(config.parent)) == "ragmon-config", (
            f"{container.where}: {config} is not mounted"
        )
        assert config.name in k8s_named("ConfigMap", "ragmon-config")["data"]
        if container.argv[1] == "faithfulness":
            for path in _faithfulness_model_paths(text):
                assert any(
                    Path(path).is_relative_to(m) and s == "ragmon-models" for m, s in mounts.items()
                ), path


def test_k8s_api_reads_its_keys_from_the_mounted_secret() -> None:
    (api,) = [c for c in k8s_ragmon_containers() if c.role == "api"]
    keys_file = Path(api.env["RAGMON_API_KEYS_FILE"])
    assert _volume_mounts(api).get(str(keys_file.parent)) == "ragmon-api-keys"
    volume = next(v for v in api.raw["deployment"]["spec"]["template"]["spec"]["volumes"] if "secret" in v)
    assert [i["path"] for i in volume["secret"]["items"]] == [keys_file.name]


def test_compose_api_has_a_way_to_get_keys() -> None:
    """Without a key the API refuses to start: compose must pass the variables through."""
    (api,) = [c for c in compose_ragmon_containers() if c.role == "api"]
    raw_env = compose_services()["api"]["environment"]
    assert {"RAGMON_API_KEYS", "RAGMON_DEV_API_KEY"} <= set(raw_env)
    assert "${RAGMON_DEV_API_KEY" in raw_env["RAGMON_DEV_API_KEY"]
    assert api.env["RAGMON_API_KEYS"] == "[]"
