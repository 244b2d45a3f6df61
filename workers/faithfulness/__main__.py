"""`ragmon worker faithfulness` / `python -m workers.faithfulness`: HHEM scores on a sampled subset.

The worker keeps no state in Redis: the runtime's dedupe covers redelivery, and the budget's
per-request memory is deliberately per worker (twins share a partition, hence a worker). Without the
`ml` extra it exits with one line naming it and status 78, which `ragmon up` reports as off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.contracts.extras import FAITHFULNESS_MODULES
from workers.checks.config import ChecksConfig
from workers.faithfulness.config import FaithfulnessConfig
from workers.faithfulness.metrics import FaithfulnessMetrics
from workers.runtime.app import WorkerContext, WorkerSpec, main_for

if TYPE_CHECKING:
    from workers.faithfulness.processor import FaithfulnessProcessor


def build(ctx: WorkerContext[FaithfulnessConfig]) -> FaithfulnessProcessor:
    """A model that cannot load yields a not-ready processor, not an error."""
    # Imported here: the processor imports torch, which only the `ml` extra installs (checked first).
    from workers.faithfulness.processor import FaithfulnessProcessor

    return FaithfulnessProcessor(
        ctx.config,
        emitter=ctx.emitter,
        metrics=FaithfulnessMetrics(ctx.registry),
        topics=ctx.settings.topics,
        checks=ctx.sections.get("checks"),  # the answer checks' section (docs/checks.md)
    )


WORKER = WorkerSpec(
    "faithfulness",
    build,
    FaithfulnessConfig,
    sections=(("checks", ChecksConfig),),
    requires=("ml", FAITHFULNESS_MODULES),
)

if __name__ == "__main__":
    main_for(WORKER)
