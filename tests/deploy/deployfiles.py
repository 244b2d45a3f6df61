"""Readers for the deploy files, shared by the tests in tests/deploy.

Everything here is offline: the files are parsed, never applied. A ragmon
container is described once (`RagmonContainer`) whether it comes from the
compose file or a Kubernetes Deployment, so the checks against the code
(command, environment, ports) are written once for both.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
K8S_DIR = DEPLOY / "k8s"
PROMETHEUS_COMPOSE = DEPLOY / "prometheus" / "prometheus.compose.yml"
GRAFANA_PROVISIONING = DEPLOY / "grafana" / "provisioning"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

RAGMON_IMAGE = "ragmon"
# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message}: compose interpolation.
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def interpolate_defaults(value: str) -> str:
    """A compose value as compose renders it with none of the variables set."""

    def default(m: re.Match[str]) -> str:
        op, text = m.group(2), m.group(3) or ""
        return text if op in (":-", "-") else ""

    return _INTERPOLATION.sub(default, value)


class GoYamlLoader(yaml.SafeLoader):
    """Reads what Go's YAML writers (kubectl kustomize) print: a bare `=` is the string "=", not YAML 1.1's value tag."""


GoYamlLoader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


def load_yaml_documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@cache
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


def compose_services() -> dict[str, dict[str, Any]]:
    return dict(compose()["services"])


def kustomization() -> dict[str, Any]:
    data = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    assert isinstance(data, dict)
    return data


@cache
def k8s_objects() -> tuple[dict[str, Any], ...]:
    """Every object of the kustomization's resources, in order."""
    objects: list[dict[str, Any]] = []
    for name in kustomization()["resources"]:
        objects.extend(load_yaml_documents(K8S_DIR / name))
    return tuple(objects)


def k8s_of_kind(kind: str) -> list[dict[str, Any]]:
    return [o for o in k8s_objects() if o["kind"] == kind]


def k8s_named(kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in k8s_of_kind(kind) if o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name!r}, found {len(matches)}"
    return matches[0]


def image_name_and_tag(image: str) -> tuple[str, str | None]:
    """('apache/kafka', '3.9.0') for 'apache/kafka:3.9.0'; a registry port is not a tag."""
    image = image.split("@", 1)[0]
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = image.rsplit(":", 1)
        return name, tag
    return image, None


def command_argv(command: str | list[str]) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(a) for a in command]


@dataclass
class RagmonContainer:
    """One container running the ragmon image, with what the code will see."""

    where: str  # "compose service api", "k8s Deployment ragmon-api"
    argv: list[str]  # arguments after the `ragmon` entrypoint
    env: dict[str, str]  # resolved environment (compose defaults interpolated, envFrom expanded)
    ports: dict[str, int] = field(default_factory=dict)  # k8s port name -> containerPort ("" for compose)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def role(self) -> str:
        return self.argv[0]


def _compose_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): interpolate_defaults(str(v)) for k, v in env.items()}


def compose_ragmon_containers() -> list[RagmonContainer]:
    out = []
    for name, svc in compose_services().items():
        if image_name_and_tag(svc.get("image", ""))[0] != RAGMON_IMAGE:
            continue
        out.append(
            RagmonContainer(
                f"compose service {name}", command_argv(svc["command"]), _compose_env(svc), raw=svc
            )
        )
    return out


def _configmap_data(name: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in k8s_named("ConfigMap", name).get("data", {}).items()}


# Secrets the operator creates (docs/deploy.md, "Secrets") that pods read whole with envFrom: the
# variables each must hold. Their values are not in the repository; only the names are checked.
ENV_SECRETS: dict[str, tuple[str, ...]] = {"ragmon-redis": ("RAGMON_REDIS_URL",)}


def _k8s_env(container: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "secretRef" in source:
            name = source["secretRef"]["name"]
            assert name in ENV_SECRETS, f"envFrom a Secret nobody documents: {name}"
            env.update(dict.fromkeys(ENV_SECRETS[name], "<secret>"))
            continue
        assert "configMapRef" in source, f"envFrom other than a ConfigMap or a documented Secret: {source}"
        env.update(_configmap_data(source["configMapRef"]["name"]))
    for item in container.get("env", []):
        # valueFrom (a pod field, a Secret) is resolved by the kubelet; only the name is checked
        env[item["name"]] = str(item.get("value", "<valueFrom>"))
    return env


def k8s_ragmon_containers() -> list[RagmonContainer]:
    out = []
    for deployment in k8s_of_kind("Deployment"):
        for c in deployment["spec"]["template"]["spec"]["containers"]:
            if image_name_and_tag(c["image"])[0] != RAGMON_IMAGE:
                continue
            assert "command" not in c, "the image's ENTRYPOINT is `ragmon`: set args, not command"
            ports = {p["name"]: int(p["containerPort"]) for p in c.get("ports", [])}
            out.append(
                RagmonContainer(
                    f"k8s Deployment {deployment['metadata']['name']}",
                    command_argv(c["args"]),
                    _k8s_env(c),
                    ports,
                    raw={"deployment": deployment, "container": c},
                )
            )
    return out


def all_ragmon_containers() -> list[RagmonContainer]:
    return compose_ragmon_containers() + k8s_ragmon_containers()


def prometheus_compose() -> dict[str, Any]:
    data = yaml.safe_load(PROMETHEUS_COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def compose_bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source with compose's defaults filled in, target) of each host-path volume of a compose service."""
    mounts = []
    named = set(compose().get("volumes") or {})
    for volume in service.get("volumes", []):
        source, target = interpolate_defaults(str(volume)).split(":")[:2]
        if source not in named:
            mounts.append((source, target))
    return mounts


def compose_path(source: str) -> Path:
    """A bind-mount source resolved as compose does: relative to the compose file's folder."""
    return (COMPOSE_FILE.parent / source).resolve()


@dataclass
class DockerInstruction:
    keyword: str
    args: str
    stage: int


def dockerfile_instructions() -> list[DockerInstruction]:
    """Instructions with continuation lines joined and comments dropped; stage counts FROMs (0-based)."""
    logical: list[str] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    out: list[DockerInstruction] = []
    stage = -1
    for text in logical:
        keyword, _, args = text.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        out.append(DockerInstruction(keyword, args.strip(), stage))
    return out


def grafana_datasources() -> list[dict[str, Any]]:
    data = yaml.safe_load((GRAFANA_PROVISIONING / "datasources" / "ragmon.yml").read_text())
    return list(data["datasources"])


def grafana_dashboard_providers() -> list[dict[str, Any]]:
    data = yaml.safe_load((GRAFANA_PROVISIONING / "dashboards" / "ragmon.yml").read_text())
    return list(data["providers"])


def env_names(settings: type[Any]) -> set[str]:
    """The environment variable of every field of a pydantic-settings class."""
    prefix = settings.model_config.get("env_prefix", "")
    return {f"{prefix}{name}".upper() for name in settings.model_fields}


def duration_seconds(duration: str) -> float:
    """A Prometheus/compose duration such as 15s, 1m30s."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration)
    assert parts and "".join(a + b for a, b in parts) == duration, f"bad duration {duration!r}"
    return sum(float(n) * units[u] for n, u in parts)
