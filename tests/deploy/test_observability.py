"""Prometheus, Alertmanager and Grafana in compose are wired to the files the repository provides."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.deployfiles import (
    DEPLOY,
    GRAFANA_PROVISIONING,
    PROMETHEUS_COMPOSE,
    ROOT,
    command_argv,
    compose_bind_mounts,
    compose_path,
    compose_services,
    duration_seconds,
    grafana_dashboard_providers,
    grafana_datasources,
    prometheus_compose,
)
from tests.support.tools import require_tool

RULES_DIR = DEPLOY / "prometheus"
ALERTMANAGER_CONFIG = DEPLOY / "alertmanager.yml"
DASHBOARDS = ROOT / "dashboards" / "grafana"
# Written by other parts of the project, possibly after this one: absent is tolerated, wrong is not.
MAY_BE_ABSENT = {ALERTMANAGER_CONFIG}


def _mounts(service: str) -> dict[Path, str]:
    """Resolved host source -> container target of a compose service's bind mounts."""
    return {
        compose_path(source): target for source, target in compose_bind_mounts(compose_services()[service])
    }


def _flag(service: str, flag: str) -> str:
    argv = command_argv(compose_services()[service]["command"])
    (value,) = [a.split("=", 1)[1] for a in argv if a.startswith(flag + "=")]
    return value


def test_bind_mount_sources_exist() -> None:
    for name, svc in compose_services().items():
        for source, _target in compose_bind_mounts(svc):
            path = compose_path(source)
            if name == "worker-faithfulness":
                continue  # the operator's model directory (MODELS_DIR), documented in the README
            if path in MAY_BE_ABSENT and not path.exists():
                continue
            assert path.exists(), f"{name} mounts {source}, which is not in the repository"
            assert path.is_relative_to(ROOT), f"{name} mounts {path}, outside the repository"


def test_prometheus_loads_the_compose_config_and_the_rule_files() -> None:
    mounts = _mounts("prometheus")
    assert mounts[PROMETHEUS_COMPOSE] == _flag("prometheus", "--config.file")
    rules_target = Path(mounts[RULES_DIR])
    patterns = prometheus_compose()["rule_files"]
    assert patterns == [str(rules_target / "*.rules.yml")], patterns


def test_prometheus_sends_alerts_to_the_compose_alertmanager() -> None:
    (am,) = prometheus_compose()["alerting"]["alertmanagers"]
    assert [t for sc in am["static_configs"] for t in sc["targets"]] == ["alertmanager:9093"]
    mounts = _mounts("alertmanager")
    assert mounts[ALERTMANAGER_CONFIG] == _flag("alertmanager", "--config.file")
    if ALERTMANAGER_CONFIG.exists():
        assert ALERTMANAGER_CONFIG.is_file()


@pytest.mark.slow
def test_promtool_accepts_the_compose_config_with_the_repository_rules(tmp_path: Path) -> None:
    """promtool checks the config and loads every rule file it names; the container paths are mapped back."""
    promtool = require_tool("promtool")
    config = prometheus_compose()
    config["rule_files"] = [str(RULES_DIR / "*.rules.yml")]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rule_files = sorted(RULES_DIR.glob("*.rules.yml"))
    if rule_files:  # promtool reports the count only when the glob matched something
        assert f"{len(rule_files)} rule files found" in result.stdout, result.stdout


def test_grafana_provisioning_and_dashboards_are_mounted_where_grafana_reads_them() -> None:
    mounts = _mounts("grafana")
    assert mounts[GRAFANA_PROVISIONING] == "/etc/grafana/provisioning"
    (provider,) = grafana_dashboard_providers()
    assert provider["type"] == "file"
    assert mounts[DASHBOARDS] == provider["options"]["path"] == "/var/lib/grafana/dashboards"


def test_grafana_datasources_point_at_the_compose_prometheus_and_alertmanager() -> None:
    by_type = {d["type"]: d for d in grafana_datasources()}
    assert by_type["prometheus"]["url"] == "http://prometheus:9090"
    assert by_type["alertmanager"]["url"] == "http://alertmanager:9093"
    assert [d["uid"] for d in grafana_datasources() if d.get("isDefault")] == ["prometheus"]
    # rate() over less than a scrape interval is empty: Grafana must know the interval
    assert duration_seconds(by_type["prometheus"]["jsonData"]["timeInterval"]) == duration_seconds(
        prometheus_compose()["global"]["scrape_interval"]
    )


def _datasource_refs(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield value
            yield from _datasource_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _datasource_refs(value)


BUILTIN = {"grafana", "-- Grafana --", "-- Mixed --", "-- Dashboard --"}


@pytest.mark.parametrize("path", sorted(DASHBOARDS.glob("*.json")), ids=lambda p: p.name)
def test_dashboards_use_only_provisioned_datasources(path: Path) -> None:
    """Runs once the dashboards exist: a panel naming an unprovisioned datasource shows 'not found'."""
    provisioned = {d["uid"]: d for d in grafana_datasources()}
    names = {d["name"] for d in grafana_datasources()}
    for ref in _datasource_refs(json.loads(path.read_text())):
        if ref is None:
            continue
        uid = ref.get("uid") if isinstance(ref, dict) else ref
        if uid is None or str(uid).startswith("$") or uid in BUILTIN:
            continue
        assert uid in provisioned or uid in names, f"{path.name}: datasource {ref!r} is not provisioned"
        if isinstance(ref, dict) and ref.get("type") and uid in provisioned:
            assert ref["type"] == provisioned[uid]["type"], f"{path.name}: {ref!r}"


def _files_grafana_would_load() -> list[Path]:
    """Grafana's file provider walks the mounted folder and loads every *.json it finds.

    node_modules is ignored by git, so it is absent from a fresh clone; everything else counts.
    """
    return sorted(
        p for p in DASHBOARDS.rglob("*.json") if "node_modules" not in p.relative_to(DASHBOARDS).parts
    )


def test_every_json_in_the_mounted_dashboards_folder_is_a_dashboard() -> None:
    uids: dict[str, str] = {}
    for path in _files_grafana_would_load():
        data = json.loads(path.read_text())
        is_dashboard = isinstance(data, dict) and {"uid", "title", "panels"} <= set(data)
        assert is_dashboard, (
            f"dashboards/{path.relative_to(DASHBOARDS)} is mounted into Grafana's dashboards folder but is not a "
            "dashboard: Grafana logs a provisioning error for it on every scan; keep other JSON out of dashboards/"
        )
        assert data["uid"] not in uids, f"{path.name} and {uids[data['uid']]} share uid {data['uid']}"
        uids[data["uid"]] = path.name


def test_grafana_image_matches_the_schema_the_dashboards_are_checked_against() -> None:
    package = ROOT / "dashboards" / "package.json"
    schema = json.loads(package.read_text())["devDependencies"]["@grafana/schema"]
    tag = compose_services()["grafana"]["image"].rsplit(":", 1)[1]
    assert tag.split(".")[:2] == schema.lstrip("^~").split(".")[:2], (
        f"grafana {tag} vs @grafana/schema {schema}"
    )
