"""`ragmon worker metrics` / `python -m workers.metrics`: latency, cost, tokens and feedback series."""

from __future__ import annotations

from workers.metrics.config import MetricsConfig
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor
from workers.runtime.app import WorkerContext, WorkerSpec, main_for


def build(ctx: WorkerContext[MetricsConfig]) -> MetricsProcessor:
    return MetricsProcessor(ctx.config, MetricsWorkerMetrics(ctx.registry), ctx.redis)


WORKER = WorkerSpec("metrics", build, MetricsConfig)

if __name__ == "__main__":
    main_for(WORKER)
