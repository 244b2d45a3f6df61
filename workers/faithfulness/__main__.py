"""Entry point of the faithfulness worker: `python -m workers.faithfulness` (or `ragmon worker faithfulness`).

`build(ctx)` is what the shared consumer runtime calls to get the processor.
It reads from `ctx`: `registry` (a prometheus CollectorRegistry), `emitter`
(produces score records; the runtime flushes it before committing) and
`settings.topics` (topic names). The faithfulness worker keeps no state in
Redis: the runtime's dedupe covers redelivery, and the budget's per-request
memory is deliberately per worker (twins share a partition, hence a worker).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from service.contracts.extras import FAITHFULNESS_MODULES, require
from workers.faithfulness.config import load_config
from workers.faithfulness.metrics import FaithfulnessMetrics

if TYPE_CHECKING:
    from workers.faithfulness.processor import FaithfulnessProcessor


def build(ctx: Any) -> FaithfulnessProcessor:
    """The processor for the runtime; a model that cannot load yields a not-ready processor, not an error."""
    # Imported here: the processor imports torch, which only the `ml` extra installs (main() checks first).
    from workers.faithfulness.processor import FaithfulnessProcessor

    return FaithfulnessProcessor(
        load_config(),
        emitter=ctx.emitter,
        metrics=FaithfulnessMetrics(ctx.registry),
        topics=ctx.settings.topics,
    )


def main() -> None:
    # Without the `ml` extra: one line naming it and exit status 78, which `ragmon up` reports as off.
    require("faithfulness", "ml", FAITHFULNESS_MODULES)
    # Imported here: the runtime pulls in the Kafka and Redis clients, which the pure parts do not need.
    from workers.runtime.app import run_worker

    raise SystemExit(run_worker("faithfulness", build))


if __name__ == "__main__":
    main()
