"""Kubernetes: NetworkPolicies that match the pods and the configured endpoints, resources, image pinning."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.deployfiles import K8S_DIR, GoYamlLoader, k8s_named, k8s_of_kind

KUBE_DNS_PORT = 53
METRICS_PORT = 9100
API_PORT = 8000
API_METRICS_PORT = 9180
POSTGRES_PORT = 5432


def pod_templates() -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: o["spec"]["template"]
        for o in k8s_of_kind("Deployment") + k8s_of_kind("StatefulSet")
    }


def policies_for(labels: dict[str, str]) -> list[dict[str, Any]]:
    return [
        p
        for p in k8s_of_kind("NetworkPolicy")
        if p["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()
    ]


def ingress_ports(labels: dict[str, str]) -> set[int]:
    return {
        port["port"]
        for p in policies_for(labels)
        for rule in p["spec"].get("ingress", [])
        for port in rule.get("ports", [])
    }


def egress_ports(labels: dict[str, str]) -> set[int]:
    return {
        port["port"]
        for p in policies_for(labels)
        for rule in p["spec"].get("egress", [])
        for port in rule.get("ports", [])
    }


def egress_namespaces(labels: dict[str, str]) -> dict[int, set[str]]:
    """port -> names of the namespaces the pod may reach on it (by kubernetes.io/metadata.name)."""
    out: dict[int, set[str]] = {}
    for p in policies_for(labels):
        for rule in p["spec"].get("egress", []):
            names = {
                peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                for peer in rule["to"]
                if "namespaceSelector" in peer
            }
            for port in rule.get("ports", []):
                out.setdefault(port["port"], set()).update(names)
    return out


def test_every_pod_is_denied_by_default() -> None:
    deny = k8s_named("NetworkPolicy", "ragmon-default-deny")["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny and "egress" not in deny


def test_api_accepts_only_its_port_and_workers_only_metrics_from_prometheus() -> None:
    for name, template in pod_templates().items():
        labels = template["metadata"]["labels"]
        component = labels["app.kubernetes.io/component"]
        expected = {
            "api": {API_PORT, API_METRICS_PORT},
            "worker": {METRICS_PORT},
            "postgres": {POSTGRES_PORT},
        }[component]
        assert ingress_ports(labels) == expected, name
    # the apps reach the ingestion port only; /metrics (it names every tenant) only Prometheus
    api_rules = k8s_named("NetworkPolicy", "ragmon-api")["spec"]["ingress"]
    by_port = {port["port"]: rule["from"] for rule in api_rules for port in rule["ports"]}
    assert by_port[API_PORT] == [{"namespaceSelector": {"matchLabels": {"ragmon.io/ingest": "allowed"}}}]
    ((peer,),) = [by_port[API_METRICS_PORT]]
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    workers = k8s_named("NetworkPolicy", "ragmon-workers")["spec"]["ingress"]
    (rule,) = workers
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}


def test_egress_only_to_kafka_redis_postgres_dns_and_phoenix_or_the_collector_for_the_exporters() -> None:
    allowed = {9092, 6379, POSTGRES_PORT, KUBE_DNS_PORT}
    for name, template in pod_templates().items():
        labels = template["metadata"]["labels"]
        ports = egress_ports(labels)
        if labels["app.kubernetes.io/component"] == "postgres":
            assert ports == {KUBE_DNS_PORT}, name
        elif labels.get("ragmon.io/egress-phoenix") == "true":
            assert ports == allowed | {6006}, name
        elif labels.get("ragmon.io/egress-otel-collector") == "true":
            assert labels["ragmon.io/worker"] == "evaluations", name  # the evaluation exporter alone
            assert ports == allowed | {4318}, name
        else:
            assert ports == allowed, name
    exporter = {
        "app.kubernetes.io/name": "ragmon",
        "app.kubernetes.io/component": "worker",
        "ragmon.io/worker": "phoenix",
        "ragmon.io/egress-phoenix": "true",
    }
    assert egress_ports(exporter) == allowed | {6006}


def test_egress_namespaces_and_ports_are_where_the_configmap_points() -> None:
    env = k8s_named("ConfigMap", "ragmon-env")["data"]
    kafka_host, kafka_port = env["RAGMON_KAFKA_BOOTSTRAP_SERVERS"].split(",")[0].rsplit(":", 1)
    redis = re.match(r"rediss?://(?:[^@]*@)?([^:/]+):(\d+)", env["RAGMON_REDIS_URL"])
    assert redis
    worker = pod_templates()["ragmon-worker-metrics"]["metadata"]["labels"]
    reach = egress_namespaces(worker)
    # <service>.<namespace>.svc: the namespace is the second label of the host
    assert reach[int(kafka_port)] == {kafka_host.split(".")[1]}
    assert reach[int(redis.group(2))] == {redis.group(1).split(".")[1]}


def _quantity(value: str) -> float:
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(m|Ki|Mi|Gi)?", str(value))
    assert m, value
    return float(m.group(1)) * units.get(m.group(2) or "", 1)


def test_every_container_has_cpu_and_memory_requests_within_limits() -> None:
    for name, template in pod_templates().items():
        for c in template["spec"]["containers"]:
            res = c["resources"]
            for kind in ("cpu", "memory"):
                assert _quantity(res["requests"][kind]) <= _quantity(res["limits"][kind]), (name, kind)


def test_faithfulness_worker_fits_the_measured_hhem_footprint() -> None:
    """README benchmark: HHEM at full size runs at about 1 GB RSS; request that, with headroom under the limit."""
    (c,) = pod_templates()["ragmon-worker-faithfulness"]["spec"]["containers"]
    assert _quantity(c["resources"]["requests"]["memory"]) >= 1.25 * 2**30
    assert _quantity(c["resources"]["limits"]["memory"]) >= 2 * 2**30


def test_tagged_images_are_pulled_always() -> None:
    for name, template in pod_templates().items():
        for c in template["spec"]["containers"]:
            assert "@sha256:" in c["image"] or c.get("imagePullPolicy") == "Always", name


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_a_release_overlay_pins_the_ragmon_image_by_digest(tmp_path: Path) -> None:
    """The override docs/deploy.md documents, applied to the manifests as kustomize builds them."""
    digest = "sha256:" + "0123456789abcdef" * 4
    overlay = tmp_path / "release"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(K8S_DIR, overlay)],
                "images": [{"name": "ragmon", "newName": "registry.example.com/ragmon", "digest": digest}],
            }
        )
    )
    out = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    images = [
        c["image"]
        for d in yaml.load_all(out.stdout, Loader=GoYamlLoader)
        if d and d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    ]
    assert images and set(images) == {f"registry.example.com/ragmon@{digest}"}
