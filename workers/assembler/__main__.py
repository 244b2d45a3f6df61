"""`ragmon worker assembler` / `python -m workers.assembler`: OTLP spans (and their log events) -> native trace
events (docs/otlp.md)."""

from __future__ import annotations

import redis

from workers.assembler.assembler import Assembler
from workers.assembler.config import AssemblerConfig
from workers.assembler.metrics import AssemblerMetrics
from workers.assembler.processor import AssemblerProcessor
from workers.assembler.store import TraceStore
from workers.runtime.app import WorkerContext, WorkerSpec, main_for

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
        max_logs=config.max_logs_per_trace,
        max_log_bytes=config.max_log_bytes_per_trace,
    )


def build(ctx: WorkerContext[AssemblerConfig]) -> AssemblerProcessor:
    assembler = Assembler(
        ctx.config,
        build_store(ctx.redis, ctx.config),
        ctx.emitter,
        ctx.settings.topics,
        AssemblerMetrics(ctx.registry),
        ctx.metrics,
    )
    return AssemblerProcessor(assembler, ctx.settings.topics.spans, ctx.settings.topics.logs)


WORKER = WorkerSpec(
    "assembler", build, AssemblerConfig, emit_linger_ms=EMIT_LINGER_MS, emit_batch_bytes=EMIT_BATCH_BYTES
)

if __name__ == "__main__":
    main_for(WORKER)
