"""`ragmon up`: the embedded default on one machine.

Starts a memory-only Tansu broker (or uses the Kafka named by
RAGMON_KAFKA_BOOTSTRAP_SERVERS), a private Redis, the API, every worker,
Prometheus (and Alertmanager) when installed, and with --demo the simulator;
prints where everything is; supervises them (service/local/supervise.py:
a crashed process is restarted with backoff); on Ctrl-C stops everything by
PID in reverse order (workers get SIGTERM and finish their in-flight batch).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry, start_http_server

from service.api.settings import hash_key
from service.contracts.extras import DRIFT_ENCODER_MODULES, FIX, missing, missing_line
from service.local.discovery import worker_names
from service.local.embedded import (
    ChildProcess,
    EmbeddedError,
    Stack,
    free_port,
    preferred_or_free,
    spawn_child,
    start_broker,
    start_redis,
    wait_for_port,
)
from service.local.metrics import SupervisorMetrics
from service.local.models import report_faithfulness, with_local_models
from service.local.postgres import restart_postgres, start_postgres
from service.local.prometheus import NOT_INSTALLED, start_prometheus_stack
from service.local.secrets import load_or_create_secrets
from service.local.supervise import (
    DURABLE_KAFKA_SETTING,
    GiveUp,
    RestartPolicy,
    Supervisor,
)

# The tenants of the bundled demo scenario; each gets its own key so dashboards split by tenant.
DEMO_TENANTS = ("acme", "globex", "initech")
DEMO_CONFIG = Path(__file__).resolve().parent / "demo" / "ragmon-demo.yaml"
# Workers that feed an external system start only when it is configured (docs/phoenix.md, docs/otlp.md).
OPTIONAL_WORKERS = {
    "phoenix": "RAGMON_PHOENIX_URL",
    "forwarder": "RAGMON_FORWARD_ENDPOINT",
    "evaluations": "RAGMON_EVALUATIONS_ENDPOINT",
}


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
    restart: RestartPolicy = field(default_factory=RestartPolicy)


def _spawn_ragmon(name: str, argv: list[str], env: dict[str, str], logs: Path, port: int) -> ChildProcess:
    return spawn_child(name, [sys.executable, "-m", "service.cli", *argv], logs, port, env)


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


def default_workers(env: dict[str, str]) -> list[str]:
    """Every worker, less the optional ones whose endpoint is not configured."""
    return [n for n in worker_names() if n not in OPTIONAL_WORKERS or env.get(OPTIONAL_WORKERS[n])]


def _start_workers(opts: UpOptions, env: dict[str, str], stack: Stack, logs: Path) -> dict[str, int]:
    wanted = opts.workers.split(",") if opts.workers else default_workers(env)
    ports: dict[str, int] = {}
    for i, name in enumerate(wanted):
        port = preferred_or_free(9101 + i)
        wenv = {**env, "RAGMON_WORKER_METRICS_PORT": str(port)}
        stack.add(_spawn_ragmon(f"worker-{name}", ["worker", name], wenv, logs, port))
        ports[name] = port
    return ports


def _print_summary(
    api: str,
    key: str,
    tenant: str,
    ports: dict[str, int],
    prom: str | None,
    opts: UpOptions,
    supervisor_port: int,
    api_metrics: str,
) -> None:
    lines = [
        "",
        "ragmon is up",
        f"  API          {api}   (POST /v1/events, /readyz, /openapi.json)",
        f"  API metrics  {api_metrics}/metrics   (its own port: it names every tenant)",
        f"  API key      {key}   (tenant '{tenant}')",
    ]
    lines += [f"  worker {n:<10} http://127.0.0.1:{p}/metrics" for n, p in ports.items()]
    lines.append(
        f"  supervisor   http://127.0.0.1:{supervisor_port}/metrics   (ragmon_supervisor_restarts_total)"
    )
    if prom:
        lines.append(f"  Prometheus   {prom}   (alerts: {prom}/alerts)")
    else:
        lines.append(f"  Prometheus: {NOT_INSTALLED if opts.prometheus else 'off (--no-prometheus)'}")
    lines += [
        f"  logs         {opts.workdir / 'logs'}",
        "",
        "See events flowing:",
        f"  curl -s {api_metrics}/metrics | grep ragmon_api_events_accepted_total",
        f"  curl -s http://127.0.0.1:{ports.get('metrics', 9101)}/metrics | grep ragmon_rag_queries_total",
        "Ctrl-C stops everything.",
        "",
    ]
    print("\n".join(lines), flush=True)


def _status_line(api_metrics: str, ports: dict[str, int], off: dict[str, str] | None = None) -> str:
    def total(url: str, name: str) -> float:
        try:
            text = httpx.get(url, timeout=1).text
        except httpx.HTTPError:
            return float("nan")
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))

    off = off or {}
    parts = [f"accepted={total(api_metrics + '/metrics', 'ragmon_api_events_accepted_total'):.0f}"]
    for name, port in ports.items():
        if not off.get(f"worker-{name}", "reduced").startswith("reduced"):
            continue  # off: nothing to count
        parts.append(f"{name}={total(f'http://127.0.0.1:{port}/metrics', 'ragmon_worker_events_total'):.0f}")
    # what is off or reduced, and why (the line each of them printed when it stopped or started)
    parts += [
        f"| {name.removeprefix('worker-')} {why if why.startswith('reduced') else 'off: ' + why}"
        for name, why in sorted(off.items())
    ]
    return time.strftime("%H:%M:%S ") + " ".join(parts)


def _start_kafka(stack: Stack, supervisor: Supervisor, logs: Path) -> str:
    """The Kafka the stack uses: a durable one named in the environment, or the embedded memory-only broker."""
    external = os.environ.get(DURABLE_KAFKA_SETTING)
    if external:
        print(f"Kafka: {DURABLE_KAFKA_SETTING}={external} (not started or stopped by ragmon up)", flush=True)
        return external
    broker = stack.add(start_broker(preferred_or_free(19092), log_dir=logs))
    supervisor.watch(broker, None, restart=False)
    print(
        f"Kafka: embedded Tansu broker on 127.0.0.1:{broker.port}, memory-only: every event in it is lost when "
        f"it stops; set {DURABLE_KAFKA_SETTING}=host:port to use a durable Kafka",
        flush=True,
    )
    return f"127.0.0.1:{broker.port}"


def _supervise(
    stack: Stack, supervisor: Supervisor, api_metrics: str, ports: dict[str, int], stopping: list[bool]
) -> None:
    """Until Ctrl-C or SIGTERM: restart crashed processes; a status line every ten seconds."""
    while not stopping:
        supervisor.check()
        time.sleep(1)
        if int(time.time()) % 10 == 0:
            print(_status_line(api_metrics, ports, dict(supervisor.off)), flush=True)


@dataclass
class _Keys:
    dev: str
    tenant: str
    demo: dict[str, str]
    review: str  # a reviewer's key (scope `review`) for /review, of the first demo tenant


def _environment(
    opts: UpOptions, workdir: Path, kafka: str, redis_port: int, keys: _Keys, database_url: str
) -> dict[str, str]:
    # Secrets travel in the environment (readable by the owner only), never on a command line.
    local = load_or_create_secrets(workdir)
    review_secret = os.environ.get("RAGMON_REVIEW_SECRET") or local.review_secret
    pseudonym_key = os.environ.get("RAGMON_PSEUDONYM_KEY") or local.pseudonym_key
    env = {
        **os.environ,
        DURABLE_KAFKA_SETTING: kafka,
        "RAGMON_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "RAGMON_DEV_API_KEY": keys.dev,
        "RAGMON_DEV_TENANT": keys.tenant,
        "PYTHONUNBUFFERED": "1",
        "RAGMON_DATABASE_URL": database_url,
        "RAGMON_REVIEW_SECRET": review_secret,
        "RAGMON_PSEUDONYM_KEY": pseudonym_key,
        # Keys configured by the caller win; otherwise each demo tenant gets a fresh key, and the
        # first one a reviewer's key for /review.
        "RAGMON_API_KEYS": os.environ.get("RAGMON_API_KEYS")
        or json.dumps(
            # the simulator sends offline gold labels too: its keys have the `label` scope
            [
                {
                    "tenant": t,
                    "key_sha256": hash_key(k),
                    "scopes": ["ingest", "label"],
                    "name": f"{t}-simulator",
                }
                for t, k in keys.demo.items()
            ]
            + [
                {
                    "tenant": DEMO_TENANTS[0],
                    "key_sha256": hash_key(keys.review),
                    "scopes": ["review"],
                    "name": "reviewer",
                }
            ]
        ),
    }
    config = (
        str(Path(opts.config).resolve())
        if opts.config
        else str(DEMO_CONFIG)
        if opts.demo
        else os.environ.get("RAGMON_CONFIG")
    )
    config = with_local_models(config, workdir)
    if config:
        env["RAGMON_CONFIG"] = config
    return env


def _start_postgres(stack: Stack, supervisor: Supervisor, workdir: Path, logs: Path) -> str:
    """The private PostgreSQL, restarted like the other processes when it dies (same cluster, same port)."""
    pg = stack.add(start_postgres(workdir, log_dir=logs))

    def respawn() -> ChildProcess:
        current = next(c for c in stack.children if c.name == pg.name)
        return restart_postgres(current, workdir, log_dir=logs)

    supervisor.watch(pg, None, respawn=respawn)
    return str(pg.extra["app_url"])  # the application role, never the superuser


def _start_api(opts: UpOptions, env: dict[str, str], stack: Stack, supervisor: Supervisor, logs: Path) -> int:
    """The API; env gets RAGMON_API_METRICS_PORT (its /metrics port) for the summary and the scrape config."""
    env["RAGMON_API_METRICS_HOST"] = "127.0.0.1"
    env["RAGMON_API_METRICS_PORT"] = str(preferred_or_free(9180))
    api_port = preferred_or_free(opts.api_port)
    api = stack.add(
        _spawn_ragmon("api", ["api", "--port", str(api_port), "--log-level", "warning"], env, logs, api_port)
    )
    supervisor.watch(api, env)
    wait_for_port("127.0.0.1", api_port, 30, api.proc)
    _wait_ready(f"http://127.0.0.1:{api_port}/readyz", api, 30)
    return api_port


def _start_all(
    opts: UpOptions, stack: Stack, supervisor: Supervisor, registry: CollectorRegistry
) -> tuple[str, dict[str, int]]:
    workdir = opts.workdir.resolve()
    logs = workdir / "logs"
    kafka = _start_kafka(stack, supervisor, logs)
    redis = stack.add(start_redis(preferred_or_free(16379), log_dir=logs))
    supervisor.watch(redis, None)
    keys = _Keys(
        os.environ.get("RAGMON_DEV_API_KEY") or f"rgm_dev_{secrets.token_urlsafe(12)}",
        os.environ.get("RAGMON_DEV_TENANT", "demo"),
        {t: f"rgm_{t}_{secrets.token_urlsafe(12)}" for t in DEMO_TENANTS},
        f"rgm_review_{secrets.token_urlsafe(12)}",
    )
    # The review store: the caller's PostgreSQL, else a private one kept in the workdir across runs.
    database_url = os.environ.get("RAGMON_DATABASE_URL") or _start_postgres(stack, supervisor, workdir, logs)
    env = _environment(opts, workdir, kafka, redis.port, keys, database_url)
    api_port = _start_api(opts, env, stack, supervisor, logs)
    api_url = f"http://127.0.0.1:{api_port}"
    metrics_port = int(env["RAGMON_API_METRICS_PORT"])
    api_metrics = f"http://127.0.0.1:{metrics_port}"
    ports = _start_workers(opts, env, stack, logs)
    if "faithfulness" in ports:
        report_faithfulness(f"http://127.0.0.1:{ports['faithfulness']}", off=supervisor.off)
    absent = missing(DRIFT_ENCODER_MODULES) if "drift" in ports else []
    if absent:  # the status line names it too, with what is off
        print(
            missing_line(
                "Drift", "ml", absent, "reduced (on the app's embeddings only, no pinned-encoder query drift)"
            ),
            flush=True,
        )
        supervisor.off["worker-drift"] = "reduced: " + FIX.format(extra="ml")
    for child in stack.children:
        if child.name.startswith("worker-"):
            supervisor.watch(child, {**env, "RAGMON_WORKER_METRICS_PORT": str(child.port)})
    supervisor_port = free_port()
    start_http_server(supervisor_port, addr="127.0.0.1", registry=registry)
    prom_url = None
    if opts.prometheus:
        prom_url = start_prometheus_stack(
            stack,
            workdir,
            metrics_port,
            ports,
            env,
            opts.scrape_interval,
            extra_jobs={"ragmon-up": supervisor_port},
        )
        for child in stack.children:
            if child.name in ("prometheus", "alertmanager"):
                supervisor.watch(child, None)
    if opts.demo:
        # Keys travel in the environment, not on the command line (ps shows argv).
        sim_env = {
            **env,
            "RAGMON_API_KEY": keys.dev,
            "RAGMON_TENANT_KEYS": ",".join(f"{t}={k}" for t, k in keys.demo.items()),
        }
        stack.add(
            _spawn_ragmon(
                "simulator", ["simulate", "send", opts.scenario or "demo", "--api", api_url], sim_env, logs, 0
            )
        )
    _print_summary(api_url, keys.dev, keys.tenant, ports, prom_url, opts, supervisor_port, api_metrics)
    if not os.environ.get("RAGMON_API_KEYS"):
        print(
            f"  Review       {api_url}/review   (key {keys.review}, tenant '{DEMO_TENANTS[0]}')\n", flush=True
        )
    return api_metrics, ports


def run_up(opts: UpOptions) -> int:
    stack = Stack()
    registry = CollectorRegistry()
    supervisor = Supervisor(stack, opts.restart, SupervisorMetrics(registry))
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        api_metrics, ports = _start_all(opts, stack, supervisor, registry)
        _supervise(stack, supervisor, api_metrics, ports, stopping)
    except KeyboardInterrupt:
        pass
    except (EmbeddedError, GiveUp) as exc:
        print(f"ragmon up failed: {exc}", file=sys.stderr, flush=True)
        stack.stop_all()
        return 1
    print("stopping…", flush=True)
    stack.stop_all()
    return 0
