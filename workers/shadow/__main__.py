"""`ragmon worker shadow` / `python -m workers.shadow`: pairs candidate and production traces, compares them."""

from __future__ import annotations

from workers.runtime.app import WorkerContext, WorkerSpec, main_for
from workers.shadow.config import ShadowConfig
from workers.shadow.metrics import ShadowMetrics
from workers.shadow.processor import ShadowProcessor
from workers.shadow.store import ShadowStore


def build(ctx: WorkerContext[ShadowConfig]) -> ShadowProcessor:
    return ShadowProcessor(ctx.config, ShadowStore(ctx.redis, ctx.config), ShadowMetrics(ctx.registry))


WORKER = WorkerSpec("shadow", build, ShadowConfig)

if __name__ == "__main__":
    main_for(WORKER)
