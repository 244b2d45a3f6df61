"""The one entry point of every worker: `main_for(WorkerSpec(name, build, Config))` in `workers/NAME/__main__.py`.

It checks the extra the worker needs (`requires`: one line and exit 78 when it
is missing, service/contracts/extras.py), reads the worker settings and the
worker's config (workers/runtime/config.py) once, and fails at start with one
line naming what to fix and exit status 2 (EXIT_CONFIG_ERROR); then it
connects, builds the processor, serves /metrics and /readyz, and runs the
consumer runtime until SIGTERM. The contract a processor keeps is
workers/runtime/contract.py.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Generic, TypeVar

import prometheus_client
import redis
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ValidationError

from service.contracts.config import ConfigError
from service.contracts.extras import require
from service.contracts.kafka import ensure_topics
from service.contracts.process import tune_gc
from service.contracts.settings import describe_settings_error
from workers.runtime.config import load_worker_config
from workers.runtime.consumer import ConsumerRuntime
from workers.runtime.contract import Processor
from workers.runtime.emitter import KafkaEmitter
from workers.runtime.http import serve
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.settings import WorkerSettings

log = logging.getLogger("ragmon.worker")
C = TypeVar("C", bound=BaseModel)
EXIT_CONFIG_ERROR = 2  # a bad setting or config section: fix it, then start again


@dataclass
class WorkerContext(Generic[C]):
    """What `build` gets: the process's settings, clients and registry, and the worker's own config."""

    name: str
    settings: WorkerSettings
    registry: CollectorRegistry
    emitter: KafkaEmitter  # derived records; flushed and acknowledged before every commit
    redis: redis.Redis
    metrics: RuntimeMetrics  # the runtime's ragmon_worker_* series, for work done outside process()
    config: C
    # Shared sections the spec names in `sections` (e.g. `checks`, read by several workers), validated at
    # start like the worker's own: {section name: its model instance}.
    sections: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerSpec(Generic[C]):
    """A worker, as its `__main__.py` declares it."""

    name: str
    build: Callable[[WorkerContext[C]], Processor]
    config: type[C]
    requires: tuple[str, tuple[str, ...]] | None = None  # (extra, its modules): exit 78 when missing
    sections: tuple[tuple[str, type[BaseModel]], ...] = ()  # shared config sections the worker reads too
    # A worker that emits many records and then waits for them all lingers longer, in bigger batches.
    emit_linger_ms: int = 5
    emit_batch_bytes: int = 16384


def run_worker(spec: WorkerSpec[C], settings: WorkerSettings | None = None) -> int:
    name = spec.name
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(message)s")
    prometheus_client.disable_created_metrics()
    if spec.requires is not None:
        require(name, *spec.requires)  # SystemExit(78) with one line naming the extra
    try:
        settings = settings or WorkerSettings()
        config = load_worker_config(name, spec.config)
        sections = {section: load_worker_config(section, model) for section, model in spec.sections}
    except ValidationError as exc:  # fail at start, naming the variable to fix
        log.error("%s", describe_settings_error(exc))
        return EXIT_CONFIG_ERROR
    except ConfigError as exc:
        log.error("%s", exc)
        return EXIT_CONFIG_ERROR
    registry = CollectorRegistry()
    metrics = RuntimeMetrics(registry, name)
    ensure_topics(settings)
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)
    emitter = KafkaEmitter(
        settings,
        client_id=f"ragmon-{name}-{settings.worker_instance}",
        linger_ms=spec.emit_linger_ms,
        batch_size=spec.emit_batch_bytes,
        max_record_bytes=settings.worker_max_record_bytes,
    )
    try:
        processor = spec.build(
            WorkerContext(name, settings, registry, emitter, client, metrics, config, sections)
        )
    except ConfigError as exc:
        log.error("%s", exc)
        emitter.close()
        client.close()
        return EXIT_CONFIG_ERROR
    runtime = ConsumerRuntime(processor, settings, metrics, emitter, client)

    def readiness() -> tuple[bool, str]:
        r = runtime.readiness()
        return r.ready, r.reason

    server = serve(settings.worker_metrics_host, settings.worker_metrics_port, registry, readiness)
    port = server.server_address[1]
    print(
        f"ragmon worker {name}: metrics on http://{settings.worker_metrics_host}:{port}/metrics", flush=True
    )

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s got signal %d: finishing the in-flight batch", name, signum)
        runtime.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tune_gc()  # startup (models, schemas, clients) is done: see service/contracts/process.py
    try:
        return runtime.run()
    finally:
        server.shutdown()
        emitter.close()
        client.close()


def main_for(spec: WorkerSpec[C]) -> None:
    """The whole of a worker's `if __name__ == "__main__":` block."""
    sys.exit(run_worker(spec))
