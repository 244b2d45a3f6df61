"""`ragmon up`: the embedded default on one machine.

Starts a memory-only Tansu broker, a private Redis, the API, every worker,
Prometheus (and Alertmanager) when installed, and with --demo the simulator;
prints where everything is; on Ctrl-C stops everything by PID in reverse
order (workers get SIGTERM and finish their in-flight batch).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from service.api.settings import hash_key
from service.local.discovery import worker_names
from service.local.embedded import (
    ChildProcess,
    EmbeddedError,
    free_port,
    start_broker,
    start_redis,
    wait_for_port,
)
from service.local.postgres import start_postgres
from service.local.prometheus import start_prometheus_stack

# The tenants of the bundled demo scenario; each gets its own key so dashboards split by tenant.
DEMO_TENANTS = ("acme", "globex", "initech")
DEMO_CONFIG = Path(__file__).resolve().parent / "demo" / "ragmon-demo.yaml"


@dataclass
class UpOptions:
    demo: bool = False
    scenario: str | None = None
    workdir: Path = Path(".ragmon")
    prometheus: bool = True
    config: str | None = None
    api_port: int = 8000
    workers: str | None = None
    scrape_interval: str = "5s"


@dataclass
class Stack:
    children: list[ChildProcess] = field(default_factory=list)

    def add(self, child: ChildProcess) -> ChildProcess:
        self.children.append(child)
        return child

    def stop_all(self) -> None:
        for child in reversed(self.children):
            child.stop(timeout=30 if child.name.startswith("worker") else 10)


def _port_or_free(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
        except OSError:
            return free_port()
    return preferred


def _spawn_ragmon(name: str, argv: list[str], env: dict[str, str], logs: Path, port: int) -> ChildProcess:
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{name}.log"
    out = open(log_path, "ab")  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", *argv], stdout=out, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    return ChildProcess(name, proc, port, log_path)


def _wait_ready(url: str, child: ChildProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            raise EmbeddedError(f"{child.name} exited ({child.proc.returncode}); see {child.log_path}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise EmbeddedError(f"{child.name} not ready at {url} within {timeout:.0f}s; see {child.log_path}")


def _start_workers(opts: UpOptions, env: dict[str, str], stack: Stack, logs: Path) -> dict[str, int]:
    wanted = opts.workers.split(",") if opts.workers else worker_names()
    ports: dict[str, int] = {}
    for i, name in enumerate(wanted):
        port = _port_or_free(9101 + i)
        wenv = {**env, "RAGMON_WORKER_METRICS_PORT": str(port)}
        stack.add(_spawn_ragmon(f"worker-{name}", ["worker", name], wenv, logs, port))
        ports[name] = port
    return ports


def _print_summary(api: str, key: str, tenant: str, ports: dict[str, int], prom: str | None, opts: UpOptions) -> None:
    lines = [
        "",
        "ragmon is up",
        f"  API          {api}   (POST /v1/events, /readyz, /metrics, /docs)",
        f"  API key      {key}   (tenant '{tenant}')",
    ]
    lines += [f"  worker {n:<10} http://127.0.0.1:{p}/metrics" for n, p in ports.items()]
    if prom:
        lines.append(f"  Prometheus   {prom}   (alerts: {prom}/alerts)")
    lines += [
        f"  logs         {opts.workdir / 'logs'}",
        "",
        "See events flowing:",
        f"  curl -s {api}/metrics | grep ragmon_api_events_accepted_total",
        f"  curl -s http://127.0.0.1:{ports.get('metrics', 9101)}/metrics | grep ragmon_rag_queries_total",
        "Ctrl-C stops everything.",
        "",
    ]
    print("\n".join(lines), flush=True)


def _status_line(api: str, ports: dict[str, int]) -> str:
    def total(url: str, name: str) -> float:
        try:
            text = httpx.get(url, timeout=1).text
        except httpx.HTTPError:
            return float("nan")
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))

    parts = [f"accepted={total(api + '/metrics', 'ragmon_api_events_accepted_total'):.0f}"]
    for name, port in ports.items():
        parts.append(f"{name}={total(f'http://127.0.0.1:{port}/metrics', 'ragmon_worker_events_total'):.0f}")
    return time.strftime("%H:%M:%S ") + " ".join(parts)


def run_up(opts: UpOptions) -> int:
    workdir = opts.workdir.resolve()
    logs = workdir / "logs"
    stack = Stack()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        broker = stack.add(start_broker(_port_or_free(19092), log_dir=logs))
        redis = stack.add(start_redis(_port_or_free(16379), log_dir=logs))
        # The review store: the caller's PostgreSQL, else a private one kept in the workdir across runs.
        database_url = os.environ.get("RAGMON_DATABASE_URL") or stack.add(
            start_postgres(workdir, log_dir=logs)).extra["url"]
        review_key = f"rgm_review_{secrets.token_urlsafe(12)}"
        key = os.environ.get("RAGMON_DEV_API_KEY") or f"rgm_dev_{secrets.token_urlsafe(12)}"
        tenant = os.environ.get("RAGMON_DEV_TENANT", "demo")
        demo_keys = {t: f"rgm_{t}_{secrets.token_urlsafe(12)}" for t in DEMO_TENANTS}
        env = {**os.environ, "RAGMON_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{broker.port}",
               "RAGMON_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0", "RAGMON_DEV_API_KEY": key,
               "RAGMON_DEV_TENANT": tenant, "PYTHONUNBUFFERED": "1", "RAGMON_DATABASE_URL": database_url,
               # Keys configured by the caller win; otherwise each demo tenant gets a fresh key, and
               # the first one a reviewer's key for /review.
               "RAGMON_API_KEYS": os.environ.get("RAGMON_API_KEYS") or json.dumps(
                   [{"tenant": t, "key_sha256": hash_key(k)} for t, k in demo_keys.items()]
                   + [{"tenant": DEMO_TENANTS[0], "key_sha256": hash_key(review_key), "scopes": ["review"],
                       "name": "reviewer"}])}
        if opts.config:
            env["RAGMON_CONFIG"] = str(Path(opts.config).resolve())
        elif opts.demo:
            env["RAGMON_CONFIG"] = str(DEMO_CONFIG)
        api_port = _port_or_free(opts.api_port)
        api_url = f"http://127.0.0.1:{api_port}"
        api = stack.add(_spawn_ragmon("api", ["api", "--port", str(api_port), "--log-level", "warning"], env, logs,
                                      api_port))
        wait_for_port("127.0.0.1", api_port, 30, api.proc)
        _wait_ready(api_url + "/readyz", api, 30)
        ports = _start_workers(opts, env, stack, logs)
        prom_url = None
        if opts.prometheus:
            prom_url = start_prometheus_stack(stack, workdir, api_port, ports, env, opts.scrape_interval)
        if opts.demo:
            scenario = opts.scenario or "demo"
            # Keys travel in the environment, not on the command line (ps shows argv).
            sim_env = {**env, "RAGMON_API_KEY": key,
                       "RAGMON_TENANT_KEYS": ",".join(f"{t}={k}" for t, k in demo_keys.items())}
            stack.add(_spawn_ragmon("simulator", ["simulate", "send", scenario, "--api", api_url], sim_env, logs, 0))
        _print_summary(api_url, key, tenant, ports, prom_url, opts)
        if not os.environ.get("RAGMON_API_KEYS"):
            print(f"  Review       {api_url}/review   (key {review_key}, tenant '{DEMO_TENANTS[0]}')\n", flush=True)
        while not stopping:
            for child in stack.children:
                if not child.alive() and child.name != "simulator":
                    print(f"{child.name} exited with {child.proc.returncode}; see {child.log_path}", flush=True)
                    stopping.append(True)
            time.sleep(1)
            if int(time.time()) % 10 == 0:
                print(_status_line(api_url, ports), flush=True)
    except KeyboardInterrupt:
        pass
    except EmbeddedError as exc:
        print(f"ragmon up failed: {exc}", file=sys.stderr)
        stack.stop_all()
        return 1
    print("stopping…", flush=True)
    stack.stop_all()
    return 0
