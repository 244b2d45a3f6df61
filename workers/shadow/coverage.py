"""Coverage: the share of production requests with a twin of a candidate, against the configured shadow rate.

If the app shadows a share r of production requests and every twin is
paired, the pairs among n production requests are Binomial(n, r). So the
measured share is "far" from r when r lies outside the exact (Clopper-Pearson)
interval of pairs / n at confidence 1 - coverage_alpha: not a fixed tolerance,
but one that narrows as production requests accumulate (with 50 requests a
share of 0.12 against 0.2 is noise; with 50,000 it is lost pairs). The alpha
is small (0.001 by default) because the check is read continuously.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from scipy.special import betaincinv


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided 1 - alpha interval of a binomial proportion k / n (n > 0)."""
    lower = 0.0 if k <= 0 else float(betaincinv(k, n - k + 1, alpha / 2))
    upper = 1.0 if k >= n else float(betaincinv(k + 1, n - k, 1 - alpha / 2))
    return lower, upper


@dataclass(frozen=True)
class Coverage:
    production_traces: int  # since the candidate's first event, and earlier ones it paired with
    candidate_traces: int
    pairs: int
    coverage: float | None  # None: no production traffic yet (no data, not 0%)
    lower: float | None
    upper: float | None
    expected_coverage: float | None  # the configured shadow rate, if any
    coverage_off: bool  # the expected rate lies outside [lower, upper]
    confidence: float

    @property
    def unpaired_production(self) -> int:
        return max(0, self.production_traces - self.pairs)

    @property
    def unpaired_candidate(self) -> int:
        return max(0, self.candidate_traces - self.pairs)

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "unpaired_production": self.unpaired_production,
            "unpaired_candidate": self.unpaired_candidate,
        }


def coverage_check(
    production: int, candidate: int, pairs: int, expected: float | None, alpha: float
) -> Coverage:
    if production == 0:
        return Coverage(0, candidate, pairs, None, None, None, expected, False, 1 - alpha)
    lower, upper = clopper_pearson(pairs, production, alpha)
    off = expected is not None and not lower <= expected <= upper
    return Coverage(production, candidate, pairs, pairs / production, lower, upper, expected, off, 1 - alpha)
