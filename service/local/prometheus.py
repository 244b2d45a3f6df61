"""Prometheus (and Alertmanager) for `ragmon up`, when their binaries are installed."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from service.local.embedded import Stack, free_port, preferred_or_free, spawn_child, wait_for_port
from service.rules.cli import rendered_text

REPO_DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
INSTALL_HINT = "make run installs it, or: apt-get install prometheus prometheus-alertmanager"
NOT_INSTALLED = f"not installed ({INSTALL_HINT})"
# The routing docker compose uses too; tests/deploy/test_alert_routing.py lints and routes every alert through it.
ALERTMANAGER_CONFIG = REPO_DEPLOY.parent / "alertmanager.yml"


def prometheus_config(
    api_metrics_port: int,
    worker_ports: dict[str, int],
    rule_files: list[str],
    alertmanager_port: int | None,
    interval: str = "5s",
    extra_jobs: dict[str, int] | None = None,
) -> dict[str, object]:
    config: dict[str, object] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": rule_files,
        "scrape_configs": [
            # the API's /metrics port (not its ingestion port: service/api/metrics.py)
            {"job_name": "ragmon-api", "static_configs": [{"targets": [f"127.0.0.1:{api_metrics_port}"]}]},
            *[
                {"job_name": f"ragmon-worker-{n}", "static_configs": [{"targets": [f"127.0.0.1:{p}"]}]}
                for n, p in worker_ports.items()
            ],
            *[
                {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{p}"]}]}
                for job, p in (extra_jobs or {}).items()
            ],
        ],
    }
    if alertmanager_port:
        config["alerting"] = {
            "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}]
        }
    return config


def start_prometheus_stack(
    stack: Stack,
    workdir: Path,
    api_metrics_port: int,
    worker_ports: dict[str, int],
    env: dict[str, str],
    interval: str = "5s",
    extra_jobs: dict[str, int] | None = None,
) -> str | None:
    binary = shutil.which("prometheus")
    if binary is None:
        return None  # the summary says "Prometheus: not installed (...)"
    logs = workdir / "logs"
    am_port = None
    am_binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    am_config = ALERTMANAGER_CONFIG
    if am_binary and am_config.is_file():
        am_port = free_port()
        argv = [
            am_binary,
            f"--config.file={am_config}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            f"--storage.path={workdir / 'alertmanager'}",
            "--cluster.listen-address=",
        ]
        stack.add(spawn_child("alertmanager", argv, logs, am_port))
    elif am_binary is None:
        print(f"Alertmanager: {NOT_INSTALLED}: alerts fire in Prometheus but are not routed", flush=True)
    # Rules are rendered from the active config, so `ragmon up --config` runs the thresholds it names.
    rules_path = workdir / "ragmon.rules.yml"
    rules_path.write_text(rendered_text(env.get("RAGMON_CONFIG")))
    config_path = workdir / "prometheus.yml"
    config_path.write_text(
        yaml.safe_dump(
            prometheus_config(
                api_metrics_port, worker_ports, [str(rules_path)], am_port, interval, extra_jobs
            )
        )
    )
    port = preferred_or_free(9090)
    argv = [
        binary,
        f"--config.file={config_path}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.path={workdir / 'prometheus-data'}",
        "--storage.tsdb.retention.time=1d",
    ]
    child = stack.add(spawn_child("prometheus", argv, logs, port))
    wait_for_port("127.0.0.1", port, 30, child.proc)
    return f"http://127.0.0.1:{port}"
