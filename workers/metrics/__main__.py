"""`ragmon worker metrics` / `python -m workers.metrics`."""

from __future__ import annotations

from service.contracts.config import load_section
from workers.metrics.config import MetricsConfig
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor
from workers.runtime.app import WorkerContext, main_for


def build(ctx: WorkerContext) -> MetricsProcessor:
    config = load_section("metrics", MetricsConfig)
    return MetricsProcessor(config, MetricsWorkerMetrics(ctx.registry), ctx.redis)


if __name__ == "__main__":
    main_for("metrics", build)
