"""Ports, health checks, probes and grace periods agree with what the code listens on and how it stops."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from service.api.routes_health import router as health_router
from service.api.settings import ApiSettings
from service.local.prometheus import prometheus_config
from tests.deploy.deployfiles import (
    RagmonContainer,
    command_argv,
    compose_ragmon_containers,
    compose_services,
    duration_seconds,
    grafana_datasources,
    image_name_and_tag,
    interpolate_defaults,
    k8s_of_kind,
    k8s_ragmon_containers,
    prometheus_compose,
)
from workers.runtime.http import serve
from workers.runtime.settings import WorkerSettings

# What the third-party images listen on by default (their documented ports).
IMAGE_PORTS = {
    "redis": {6379},
    "postgres": {5432},
    "prom/prometheus": {9090},
    "prom/alertmanager": {9093},
    "grafana/grafana": {3000},
    "arizephoenix/phoenix": {6006, 4317},  # UI + OTLP/HTTP, OTLP/gRPC
}
LIVENESS, READINESS = "/healthz", "/readyz"


def ragmon_port(container: RagmonContainer) -> int:
    """The port the code will listen on, from the command line or the environment it is given."""
    if container.role == "api":
        argv = container.argv
        return (
            int(argv[argv.index("--port") + 1]) if "--port" in argv else int(container.env["RAGMON_API_PORT"])
        )
    assert container.role == "worker"
    return int(container.env["RAGMON_WORKER_METRICS_PORT"])


def ragmon_scrape_port(container: RagmonContainer) -> int:
    """Where Prometheus must scrape: the API's own metrics port (never its ingestion port), a worker's port."""
    if container.role == "api":
        return int(container.env["RAGMON_API_METRICS_PORT"])
    return ragmon_port(container)


def embedded_job_names(workers: list[str]) -> list[str]:
    """The scrape job names `ragmon up` gives Prometheus, which the rules and their tests are written for."""
    config = prometheus_config(1, {w: 2 for w in workers}, [], None)
    return [job["job_name"] for job in cast(list[dict[str, Any]], config["scrape_configs"])]


def compose_listening() -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    ragmon = {c.where.removeprefix("compose service "): c for c in compose_ragmon_containers()}
    for name, svc in compose_services().items():
        image = image_name_and_tag(svc["image"])[0]
        if name in ragmon:
            role = ragmon[name].role
            out[name] = (
                {ragmon_port(ragmon[name]), ragmon_scrape_port(ragmon[name])}
                if role in ("api", "worker")
                else set()
            )
        elif image == "apache/kafka":
            out[name] = {int(p) for p in re.findall(r":(\d+)", svc["environment"]["KAFKA_LISTENERS"])}
        else:
            out[name] = set(IMAGE_PORTS[image])
            argv = command_argv(svc.get("command", []))
            if image == "redis" and "--port" in argv:
                out[name] = {int(argv[argv.index("--port") + 1])}
    return out


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield interpolate_defaults(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k != "image":  # apache/kafka:3.9.0 is an image tag, not a port
                yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_api_and_worker_ports_are_the_codes() -> None:
    default_api_port = ApiSettings.model_fields["api_port"].default
    for container in compose_ragmon_containers() + k8s_ragmon_containers():
        if container.role == "api":
            assert ragmon_port(container) == default_api_port, container.where
        elif container.role == "worker":
            # the code's default (0) picks a free port: a container must say which
            assert WorkerSettings.model_fields["worker_metrics_port"].default == 0
            assert ragmon_port(container) == 9100, container.where
            assert container.env["RAGMON_WORKER_METRICS_HOST"] == "0.0.0.0", (
                f"{container.where}: the worker binds loopback by default; probes and scrapes come from outside"
            )


def test_compose_published_ports_are_listened_on() -> None:
    listening = compose_listening()
    for name, svc in compose_services().items():
        for mapping in svc.get("ports", []):
            container_port = int(str(mapping).rsplit(":", 1)[-1].split("/")[0])
            assert container_port in listening[name], (
                f"{name} publishes {container_port}; it listens on {listening[name]}"
            )


def test_every_service_host_port_reference_is_listened_on() -> None:
    """kafka:9092 in an env var, api:8000 in a scrape target, phoenix:6006 in OTLP: each must be a real port."""
    listening = compose_listening()
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, listening)) + r"):(\d+)\b")
    sources: dict[str, Any] = {
        "docker-compose.yml": compose_services(),
        "prometheus.compose.yml": prometheus_compose(),
    }
    sources["grafana datasources"] = grafana_datasources()
    found = 0
    for where, data in sources.items():
        for text in _strings(data):
            for host, port in pattern.findall(text):
                found += 1
                assert int(port) in listening[host], (
                    f"{where}: {host}:{port} but {host} listens on {listening[host]}"
                )
    assert found >= 10, "the reference scan found almost nothing: the pattern is broken"


def test_compose_loopback_references_are_the_services_own_ports() -> None:
    listening = compose_listening()
    for name, svc in compose_services().items():
        for text in _strings(svc.get("healthcheck", {})):
            for port in re.findall(r"(?:127\.0\.0\.1|localhost):(\d+)", text):
                assert int(port) in listening[name], f"{name}'s healthcheck calls port {port}"


def test_kafka_and_redis_addresses_match_the_brokers() -> None:
    kafka_env = compose_services()["kafka"]["environment"]
    advertised = {a.split("://", 1)[1] for a in kafka_env["KAFKA_ADVERTISED_LISTENERS"].split(",")}
    for container in compose_ragmon_containers():
        if container.role in ("api", "worker"):
            assert set(container.env["RAGMON_KAFKA_BOOTSTRAP_SERVERS"].split(",")) <= advertised, (
                container.where
            )
            # with the password (a required variable), never without
            raw = container.raw["environment"]["RAGMON_REDIS_URL"]
            assert re.fullmatch(r"redis://:\$\{REDIS_PASSWORD:\?[^}]+\}@redis:6379/\d+", raw), container.where


def test_compose_prometheus_scrapes_every_ragmon_process_with_the_embedded_job_names() -> None:
    listening = compose_listening()
    ragmon = {
        c.where.removeprefix("compose service "): c
        for c in compose_ragmon_containers()
        if c.role in ("api", "worker")
    }
    jobs = {
        j["job_name"]: [t for sc in j.get("static_configs", []) for t in sc["targets"]]
        for j in prometheus_compose()["scrape_configs"]
    }
    workers = sorted(c.argv[1] for c in ragmon.values() if c.role == "worker")
    embedded_jobs = set(embedded_job_names(workers))
    assert embedded_jobs <= set(jobs), (
        f"jobs the rules expect but compose does not scrape: {embedded_jobs - set(jobs)}"
    )
    scraped = {t for job in embedded_jobs for t in jobs[job]}
    expected = {f"{name}:{ragmon_scrape_port(c)}" for name, c in ragmon.items()}
    assert "api:9180" in scraped and "api:8000" not in scraped  # /metrics is not on the ingestion port
    del listening
    assert scraped == expected


def test_the_code_serves_the_probe_paths() -> None:
    api_paths = {route.path for route in health_router.routes}  # type: ignore[attr-defined]
    assert {LIVENESS, READINESS} <= api_paths and "/metrics" not in api_paths  # its own port
    ready = {"value": (False, "model not loaded")}
    server = serve("127.0.0.1", 0, CollectorRegistry(), lambda: ready["value"])
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert urllib.request.urlopen(base + LIVENESS, timeout=5).status == 200
        with pytest.raises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen(base + READINESS, timeout=5)
        assert not_ready.value.code == 503
        not_ready.value.close()
        ready["value"] = (True, "")
        assert json.loads(urllib.request.urlopen(base + READINESS, timeout=5).read())["ready"] is True
        assert urllib.request.urlopen(base + "/metrics", timeout=5).status == 200
    finally:
        server.shutdown()
        server.server_close()


def test_compose_healthchecks() -> None:
    listening = compose_listening()
    services = compose_services()
    ragmon = {c.where.removeprefix("compose service "): c for c in compose_ragmon_containers()}
    without = {name for name, svc in services.items() if "healthcheck" not in svc}
    # the simulator is a client: no port to probe (Phoenix is probed with its image's own Python)
    assert without == {"simulator"}, without
    for name, container in ragmon.items():
        if container.role not in ("api", "worker"):
            continue
        test = " ".join(services[name]["healthcheck"]["test"])
        port = ragmon_port(container)
        assert port in listening[name]
        assert f"http://127.0.0.1:{port}{READINESS}'" in test, f"{name}: healthcheck {test!r}"


def test_compose_depends_on_conditions() -> None:
    services = compose_services()
    for name, svc in services.items():
        for dep, spec in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in services[dep], (
                    f"{name} waits for {dep} to be healthy; it has no healthcheck"
                )
    for container in compose_ragmon_containers():
        if container.role in ("api", "worker"):
            deps = container.raw["depends_on"]
            for dep in ("kafka", "redis"):
                assert deps[dep]["condition"] == "service_healthy", f"{container.where} must wait for {dep}"


def uvicorn_graceful_shutdown_s() -> float:
    """The timeout_graceful_shutdown that `ragmon api` passes to uvicorn (service/api/connections.py)."""
    from service.api.connections import GRACEFUL_SHUTDOWN_S, server_options
    from service.api.settings import ApiSettings

    assert server_options(ApiSettings(api_keys=[]))["timeout_graceful_shutdown"] == GRACEFUL_SHUTDOWN_S
    return float(GRACEFUL_SHUTDOWN_S)


def worker_shutdown_grace(container: RagmonContainer) -> float:
    value = container.env.get("RAGMON_WORKER_SHUTDOWN_GRACE_S")
    return (
        float(value) if value is not None else WorkerSettings.model_fields["worker_shutdown_grace_s"].default
    )


def test_grace_periods_outlast_the_code_s_own_shutdown() -> None:
    default = WorkerSettings().worker_shutdown_grace_s
    for container in compose_ragmon_containers():
        grace = container.raw.get("stop_grace_period")
        if container.role == "worker":
            assert grace and duration_seconds(grace) > max(default, worker_shutdown_grace(container)), (
                container.where
            )
        elif container.role == "api":
            assert grace and duration_seconds(grace) > uvicorn_graceful_shutdown_s(), container.where
    for container in k8s_ragmon_containers():
        period = container.raw["deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        if container.role == "worker":
            assert period > max(default, worker_shutdown_grace(container)), container.where
        else:
            assert period > uvicorn_graceful_shutdown_s(), container.where


K8S = k8s_ragmon_containers()


@pytest.mark.parametrize("container", K8S, ids=[c.where for c in K8S])
def test_k8s_probes(container: RagmonContainer) -> None:
    c = container.raw["container"]
    expected = {"readinessProbe": READINESS, "livenessProbe": LIVENESS, "startupProbe": LIVENESS}
    for probe, path in expected.items():
        assert probe in c, f"{container.where}: no {probe}"
        get = c[probe]["httpGet"]
        assert get["path"] == path, f"{container.where}: {probe} on {get['path']}"
        port = container.ports[get["port"]] if isinstance(get["port"], str) else get["port"]
        assert port == ragmon_port(container), f"{container.where}: {probe} on port {port}"
    assert sorted(container.ports.values()) == sorted({ragmon_port(container), ragmon_scrape_port(container)})


def _pod_templates() -> list[dict[str, Any]]:
    return [d["spec"]["template"] for d in k8s_of_kind("Deployment") + k8s_of_kind("StatefulSet")]


def _selected(selector: dict[str, str]) -> list[dict[str, Any]]:
    return [t for t in _pod_templates() if selector.items() <= t["metadata"]["labels"].items()]


def _port_names(template: dict[str, Any]) -> set[str]:
    return {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}


def test_k8s_services_select_pods_with_their_target_ports() -> None:
    for service in k8s_of_kind("Service"):
        pods = _selected(service["spec"]["selector"])
        assert pods, f"Service {service['metadata']['name']} selects no pod"
        for port in service["spec"]["ports"]:
            for pod in pods:
                assert port["targetPort"] in _port_names(pod), (
                    f"{service['metadata']['name']}: {port['targetPort']}"
                )


def test_k8s_deployment_selectors_match_their_pods() -> None:
    for d in k8s_of_kind("Deployment") + k8s_of_kind("StatefulSet"):
        selector = d["spec"]["selector"]["matchLabels"]
        assert selector.items() <= d["spec"]["template"]["metadata"]["labels"].items(), d["metadata"]["name"]
        assert _selected(selector) == [d["spec"]["template"]], (
            f"{d['metadata']['name']}: selector overlaps another"
        )


def test_podmonitors_scrape_every_ragmon_pod_with_the_embedded_job_names() -> None:
    scraped: list[str] = []
    for monitor in k8s_of_kind("PodMonitor"):
        pods = _selected(monitor["spec"]["selector"]["matchLabels"])
        assert pods, f"PodMonitor {monitor['metadata']['name']} selects no pod"
        for pod in pods:
            for endpoint in monitor["spec"]["podMetricsEndpoints"]:
                assert endpoint["port"] in _port_names(pod)
                assert endpoint.get("path", "/metrics") == "/metrics"
            scraped.append(pod["metadata"]["labels"][monitor["spec"]["jobLabel"]])
    workers = sorted(c.argv[1] for c in K8S if c.role == "worker")
    assert sorted(scraped) == sorted(embedded_job_names(workers))
