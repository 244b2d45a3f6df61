"""Every YAML file under deploy/ that this part owns parses, and the kustomization lists them all."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.deploy.deployfiles import (
    COMPOSE_FILE,
    DEPLOY,
    GRAFANA_PROVISIONING,
    K8S_DIR,
    PROMETHEUS_COMPOSE,
    k8s_objects,
    kustomization,
    load_yaml_documents,
)

OWN_YAML = sorted(
    [COMPOSE_FILE, PROMETHEUS_COMPOSE, *K8S_DIR.glob("*.yaml"), *GRAFANA_PROVISIONING.rglob("*.yml")]
)
# Written by others; parsed here too when they exist, so a broken file fails in this suite as well.
OTHER_YAML = sorted([*DEPLOY.glob("prometheus/*.rules.yml"), *DEPLOY.glob("alertmanager.yml")])


@pytest.mark.parametrize("path", OWN_YAML + OTHER_YAML, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path: Path) -> None:
    documents = load_yaml_documents(path)
    assert documents, f"{path} is empty"
    assert all(isinstance(d, dict) for d in documents), f"{path}: every document must be a mapping"


def test_own_files_are_all_there() -> None:
    names = {p.relative_to(DEPLOY).as_posix() for p in OWN_YAML}
    assert {
        "docker-compose.yml",
        "prometheus/prometheus.compose.yml",
        "k8s/kustomization.yaml",
        "grafana/provisioning/datasources/ragmon.yml",
        "grafana/provisioning/dashboards/ragmon.yml",
    } <= names


def test_kustomization_lists_every_manifest() -> None:
    listed = set(kustomization()["resources"])
    on_disk = {p.name for p in K8S_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk, (
        f"listed but missing: {listed - on_disk}; on disk but not listed: {on_disk - listed}"
    )


def test_every_k8s_object_has_kind_name_and_api_version() -> None:
    seen = set()
    for obj in k8s_objects():
        assert {"apiVersion", "kind", "metadata"} <= set(obj), obj
        key = (obj["kind"], obj["metadata"]["name"])
        assert key not in seen, f"{key} defined twice"
        seen.add(key)
        # `kubectl apply -f deploy/k8s/x.yaml` must not land in `default`: each object names the
        # namespace itself, the same one the kustomization sets
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") == kustomization()["namespace"], f"{key}: namespace"
    assert (
        yaml.safe_load((K8S_DIR / "namespace.yaml").read_text())["metadata"]["name"]
        == kustomization()["namespace"]
    )
