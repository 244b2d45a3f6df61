"""run_worker(name, build): one worker process around a processor."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import prometheus_client
import redis
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from service.contracts.config import ConfigError
from service.contracts.kafka import ensure_topics
from service.contracts.process import tune_gc
from service.contracts.settings import describe_settings_error
from workers.runtime.consumer import ConsumerRuntime
from workers.runtime.emitter import KafkaEmitter
from workers.runtime.http import serve
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.settings import WorkerSettings
from workers.runtime.types import Processor

log = logging.getLogger("ragmon.worker")


@dataclass
class WorkerContext:
    name: str
    settings: WorkerSettings
    registry: CollectorRegistry
    emitter: KafkaEmitter
    redis: redis.Redis


def run_worker(
    name: str, build: Callable[[WorkerContext], Processor], settings: WorkerSettings | None = None
) -> int:
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(message)s")
    prometheus_client.disable_created_metrics()
    try:
        settings = settings or WorkerSettings()
    except ValidationError as exc:  # fail at start, naming the variable to fix
        log.error("%s", describe_settings_error(exc))
        return 2
    registry = CollectorRegistry()
    metrics = RuntimeMetrics(registry, name)
    ensure_topics(settings)
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)
    emitter = KafkaEmitter(
        settings,
        client_id=f"ragmon-{name}-{settings.worker_instance}",
        max_record_bytes=settings.worker_max_record_bytes,
    )
    try:
        processor = build(WorkerContext(name, settings, registry, emitter, client))
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    runtime = ConsumerRuntime(processor, settings, metrics, emitter, client)

    def readiness() -> tuple[bool, str]:
        if runtime.halted:
            return False, f"halted: {runtime.halted}"
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


def main_for(name: str, build: Callable[[WorkerContext], Processor]) -> None:
    sys.exit(run_worker(name, build))
