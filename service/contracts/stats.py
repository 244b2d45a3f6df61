"""Small numeric helpers the service and the workers share: pure functions, no I/O.

They live under service.contracts because that is the one package of `service`
the workers may import (docs/architecture.md, "Layering").
"""

from __future__ import annotations

import math
from typing import Any

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile: two-sided 95%


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion `successes / trials` (95% by default)."""
    if trials <= 0:
        raise ValueError(f"trials must be positive, got {trials}")
    p = successes / trials
    denom = 1.0 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    # The interval always holds p; min/max keep rounding (at p = 0 or 1) from leaving it outside.
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def is_finite(value: Any) -> bool:
    """A number that is there and bounded: not None, NaN or an infinity."""
    return value is not None and math.isfinite(value)


def json_finite(value: Any) -> Any:
    """`value` with every NaN and infinity in its dicts and lists replaced by None (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_finite(v) for v in value]
    return value
