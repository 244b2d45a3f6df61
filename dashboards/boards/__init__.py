"""One module per dashboard; each has a stable `UID` and `build(limits) -> Board`."""

from __future__ import annotations

from collections.abc import Callable

from dashboards.boards import (
    drift,
    feedback,
    intents,
    latency_cost,
    overview,
    pipeline,
    quality,
    review,
    shadow,
)
from dashboards.common import Board, Limits

BUILDERS: tuple[Callable[[Limits], Board], ...] = (
    overview.build,
    latency_cost.build,
    quality.build,
    intents.build,
    drift.build,
    shadow.build,
    feedback.build,
    pipeline.build,
    review.build,
)
