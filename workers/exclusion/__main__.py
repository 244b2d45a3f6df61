"""Entry point: `python -m workers.exclusion` (or `ragmon worker exclusion`)."""

from __future__ import annotations

import sys
from typing import Any

from workers.exclusion.config import load_exclusion_config
from workers.exclusion.metrics import ExclusionMetrics
from workers.exclusion.processor import ExclusionProcessor


def build(ctx: Any) -> ExclusionProcessor:
    """Construct the processor from the runtime's context (its registry, Redis client).

    The config section is read here, at start, so a bad threshold stops the
    worker with the field named before it consumes anything.
    """
    config = load_exclusion_config()
    return ExclusionProcessor(
        ctx.redis,
        ExclusionMetrics(ctx.registry, config),
        config,
        emitter=ctx.emitter,
        scores_topic=ctx.settings.topics.scores,
    )


def main() -> None:
    # Imported here: the runtime is a separate package that the pure parts do not need.
    from workers.runtime.app import run_worker

    sys.exit(run_worker("exclusion", build))


if __name__ == "__main__":
    main()
