"""`ragmon worker exclusion` / `python -m workers.exclusion`: metadata-filter false exclusion."""

from __future__ import annotations

from workers.exclusion.config import ExclusionConfig
from workers.exclusion.metrics import ExclusionMetrics
from workers.exclusion.processor import ExclusionProcessor
from workers.runtime.app import WorkerContext, WorkerSpec, main_for


def build(ctx: WorkerContext[ExclusionConfig]) -> ExclusionProcessor:
    return ExclusionProcessor(
        ctx.redis,
        ExclusionMetrics(ctx.registry, ctx.config),
        ctx.config,
        emitter=ctx.emitter,
        scores_topic=ctx.settings.topics.scores,
    )


WORKER = WorkerSpec("exclusion", build, ExclusionConfig)

if __name__ == "__main__":
    main_for(WORKER)
