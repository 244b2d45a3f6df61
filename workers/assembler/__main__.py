"""`ragmon worker assembler` / `python -m workers.assembler`: OTLP spans -> native trace events (docs/otlp.md)."""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType

import prometheus_client
import redis
from prometheus_client import CollectorRegistry

from service.contracts.config import ConfigError, load_section
from service.contracts.kafka import ensure_topics
from service.contracts.process import tune_gc
from workers.assembler.assembler import WORKER, Assembler
from workers.assembler.config import AssemblerConfig
from workers.assembler.metrics import AssemblerMetrics
from workers.assembler.runner import AssemblerLoop
from workers.assembler.store import TraceStore
from workers.runtime.emitter import KafkaEmitter
from workers.runtime.http import serve
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.settings import WorkerSettings

log = logging.getLogger("ragmon.worker.assembler")
# A tick emits up to max_traces_per_tick events and then waits for them all (which flushes):
# lingering meanwhile batches them instead of waking the producer's sender for each one.
EMIT_LINGER_MS = 200
EMIT_BATCH_BYTES = 512 * 1024


def build_store(client: redis.Redis, config: AssemblerConfig) -> TraceStore:
    return TraceStore(
        client,
        config.key_prefix,
        quiet_s=config.quiet_period_s,
        max_spans=config.max_spans_per_trace,
        max_bytes=config.max_bytes_per_trace,
        ttl_s=config.state_ttl_s,
        done_ttl_s=config.done_ttl_s,
        lease_s=config.claim_lease_s,
    )


def main() -> int:
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {WORKER} %(levelname)s %(message)s")
    prometheus_client.disable_created_metrics()
    settings = WorkerSettings()
    try:
        config = load_section("assembler", AssemblerConfig)
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    registry = CollectorRegistry()
    ensure_topics(settings)
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)
    emitter = KafkaEmitter(
        settings,
        client_id=f"ragmon-{WORKER}-{settings.worker_instance}",
        linger_ms=EMIT_LINGER_MS,
        batch_size=EMIT_BATCH_BYTES,
        max_record_bytes=settings.worker_max_record_bytes,
    )
    runtime_metrics = RuntimeMetrics(registry, WORKER)
    assembler = Assembler(
        config,
        build_store(client, config),
        emitter,
        settings.topics,
        AssemblerMetrics(registry),
        runtime_metrics,
    )
    loop = AssemblerLoop(assembler, settings, runtime_metrics)
    server = serve(settings.worker_metrics_host, settings.worker_metrics_port, registry, loop.readiness)
    print(
        f"ragmon worker {WORKER}: metrics on http://{settings.worker_metrics_host}:{server.server_address[1]}"
        "/metrics",
        flush=True,
    )

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("got signal %d: finishing the in-flight batch", signum)
        loop.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tune_gc()
    try:
        return loop.run()
    finally:
        server.shutdown()
        emitter.close()
        client.close()


if __name__ == "__main__":
    sys.exit(main())
