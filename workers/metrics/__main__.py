"""`ragmon worker metrics` / `python -m workers.metrics`: latency, cost, tokens and feedback series."""

from __future__ import annotations

from workers.checks.config import ChecksConfig
from workers.metrics.config import MetricsConfig
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor
from workers.runtime.app import WorkerContext, WorkerSpec, main_for


def build(ctx: WorkerContext[MetricsConfig]) -> MetricsProcessor:
    checks = ctx.sections.get("checks")  # the answer checks' section (docs/checks.md)
    return MetricsProcessor(ctx.config, MetricsWorkerMetrics(ctx.registry), ctx.redis, checks=checks)


WORKER = WorkerSpec("metrics", build, MetricsConfig, sections=(("checks", ChecksConfig),))

if __name__ == "__main__":
    main_for(WORKER)
