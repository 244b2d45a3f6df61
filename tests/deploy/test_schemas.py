"""The compose file and the Kubernetes objects against their published schemas, offline.

The compose-spec JSON Schema ships inside the check-jsonschema wheel and the
Kubernetes OpenAPI-derived schemas inside kubernetes-validate; both are in the
dev extra. The Prometheus Operator's CRDs have no schema there, so PodMonitor
fields are checked against the CRD's field list below.
"""

from __future__ import annotations

import json
import subprocess
from importlib import resources
from typing import Any

import pytest
import yaml

from tests.deploy.deployfiles import K8S_DIR, GoYamlLoader, compose, k8s_objects, k8s_of_kind, kustomization
from tests.support.tools import require_module, require_tool

# Oldest Kubernetes minor still maintained upstream when this was written, and the newest the wheel knows.
K8S_VERSIONS = ["1.31.0", "latest"]

# monitoring.coreos.com/v1 PodMonitor fields used or commonly set (the CRD allows a few more rarely used ones).
PODMONITOR_SPEC = {
    "jobLabel",
    "selector",
    "namespaceSelector",
    "podMetricsEndpoints",
    "podTargetLabels",
    "sampleLimit",
    "targetLimit",
    "labelLimit",
    "attachMetadata",
    "scrapeProtocols",
}
PODMETRICS_ENDPOINT = {
    "port",
    "portNumber",
    "path",
    "interval",
    "scrapeTimeout",
    "scheme",
    "params",
    "honorLabels",
    "honorTimestamps",
    "relabelings",
    "metricRelabelings",
    "enableHttp2",
    "followRedirects",
    "filterRunning",
    "bearerTokenSecret",
    "basicAuth",
    "authorization",
    "oauth2",
    "tlsConfig",
    "proxyUrl",
}


def test_compose_file_matches_the_compose_spec() -> None:
    require_module("check_jsonschema")
    jsonschema = require_module("jsonschema")
    text = (
        resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    )
    validator = jsonschema.Draft7Validator(json.loads(text))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose())]
    assert not errors, "\n".join(errors)


BUILTIN = [o for o in k8s_objects() if not o["apiVersion"].startswith("monitoring.coreos.com/")]


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("obj", BUILTIN, ids=[f"{o['kind']}-{o['metadata']['name']}" for o in BUILTIN])
def test_k8s_objects_match_the_kubernetes_schema(obj: dict[str, Any], version: str) -> None:
    kubernetes_validate = require_module("kubernetes_validate")
    if version == "latest":
        version = kubernetes_validate.latest_version()
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"{obj['kind']} {obj['metadata']['name']} (Kubernetes {version}): {exc}")


def test_podmonitor_fields_exist_in_the_crd() -> None:
    monitors = k8s_of_kind("PodMonitor")
    assert monitors
    for monitor in monitors:
        assert set(monitor["spec"]) <= PODMONITOR_SPEC, monitor["metadata"]["name"]
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            assert set(endpoint) <= PODMETRICS_ENDPOINT, endpoint
        assert set(monitor["spec"]["selector"]) <= {"matchLabels", "matchExpressions"}


def test_operator_objects_carry_the_same_selection_label() -> None:
    """kube-prometheus-stack picks PodMonitors and PrometheusRules by one label: all of ours must agree."""
    objects = k8s_of_kind("PodMonitor") + k8s_of_kind("PrometheusRule")
    releases = {o["metadata"]["labels"].get("release") for o in objects}
    assert len(releases) == 1 and None not in releases, releases


@pytest.mark.slow
def test_kustomize_builds_the_namespaced_manifests() -> None:
    result = subprocess.run(
        [require_tool("kubectl"), "kustomize", str(K8S_DIR)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.load_all(result.stdout, Loader=GoYamlLoader) if d]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in built) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in k8s_objects()
    )
    namespace = kustomization()["namespace"]
    for d in built:
        if d["kind"] != "Namespace":
            assert d["metadata"]["namespace"] == namespace, d["metadata"]["name"]
        assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "ragmon"
