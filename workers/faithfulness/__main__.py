"""Entry point of the faithfulness worker: `python -m workers.faithfulness` (or `ragmon worker faithfulness`).

`build(ctx)` is what the shared consumer runtime calls to get the processor.
It reads from `ctx`: `registry` (a prometheus CollectorRegistry), `emitter`
(produces score records; the runtime flushes it before committing) and
`settings.topics` (topic names). The faithfulness worker keeps no state in
Redis: the runtime's dedupe covers redelivery, and the budget's per-request
memory is deliberately per worker (twins share a partition, hence a worker).
"""

from __future__ import annotations

from typing import Any

from workers.faithfulness.config import load_config
from workers.faithfulness.metrics import FaithfulnessMetrics
from workers.faithfulness.processor import FaithfulnessProcessor


def build(ctx: Any) -> FaithfulnessProcessor:
    """The processor for the runtime; a model that cannot load yields a not-ready processor, not an error."""
    return FaithfulnessProcessor(
        load_config(),
        emitter=ctx.emitter,
        metrics=FaithfulnessMetrics(ctx.registry),
        topics=ctx.settings.topics,
    )


def main() -> None:
    # Imported here: the runtime pulls in the Kafka and Redis clients, which the pure parts do not need.
    from workers.runtime.app import run_worker

    raise SystemExit(run_worker("faithfulness", build))


if __name__ == "__main__":
    main()
