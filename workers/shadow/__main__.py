"""`ragmon worker shadow` / `python -m workers.shadow`: pairs candidate and production traces, compares them."""

from __future__ import annotations

from workers.runtime.app import WorkerContext, main_for
from workers.shadow.config import load_shadow_config
from workers.shadow.metrics import ShadowMetrics
from workers.shadow.processor import ShadowProcessor
from workers.shadow.store import ShadowStore


def build(ctx: WorkerContext) -> ShadowProcessor:
    config = load_shadow_config()
    return ShadowProcessor(config, ShadowStore(ctx.redis, config), ShadowMetrics(ctx.registry))


if __name__ == "__main__":
    main_for("shadow", build)
