"""The result records of a comparison (plain dataclasses: JSON via dataclasses.asdict)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from service.contracts.stats import json_finite


@dataclass
class MetricResult:
    metric: str
    binary: bool
    higher_is_better: bool
    judgement: str
    margin: float
    n: int
    production_mean: float
    candidate_mean: float
    delta: float  # candidate - production, in the metric's units
    sd: float
    wins: int  # pairs where the candidate did better (by the metric's direction)
    losses: int
    ties: int
    sign_p: float
    bootstrap_lower: float
    bootstrap_upper: float
    cs_lower: float
    cs_upper: float
    anytime_p: float
    sign_p_holm: float = 1.0
    anytime_p_holm: float = 1.0
    verdict: str = "not_enough_data"
    reason: str = ""
    detectable_effect: float = math.inf
    effect_of_interest: float = math.nan
    pairs_needed: float = math.inf
    p95_ratio: float | None = None
    p95_ratio_lower: float | None = None
    p95_ratio_upper: float | None = None

    def whole_is_better(self) -> bool:
        """Better by the verdict, or by the fixed-n bootstrap shown beside it."""
        if self.verdict == "better":
            return True
        if self.higher_is_better:
            return self.bootstrap_lower > 0
        return self.bootstrap_upper < 0


@dataclass
class SliceResult:
    dimension: str
    value: str
    metric: str
    n: int
    wins: int
    losses: int
    ties: int
    delta: float
    bootstrap_lower: float
    bootstrap_upper: float
    sign_p: float
    masked_regression: bool  # worse in this slice while the whole is better
    strength: str  # "lead" (small or uncertain: add pairs of this slice) | "significant" | ""


@dataclass
class Comparison:
    pairs: int
    alpha: float
    metrics: list[MetricResult]
    slices: list[SliceResult]
    masked_regressions: list[SliceResult] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)  # tenant, candidate, coverage … (live reports)

    def to_dict(self) -> dict[str, Any]:
        return json_finite(asdict(self))  # NaN and infinity become null (no data / unbounded)


def comparison_from_dict(d: dict[str, Any]) -> Comparison:
    """Inverse of Comparison.to_dict (None stands for NaN/infinity: no data)."""

    def num(x: Any) -> Any:
        return math.nan if x is None else x

    metrics = [
        MetricResult(
            **{
                k: (num(v) if k not in ("p95_ratio", "p95_ratio_lower", "p95_ratio_upper") else v)
                for k, v in m.items()
            }
        )
        for m in d["metrics"]
    ]
    slices = [SliceResult(**{k: num(v) for k, v in s.items()}) for s in d["slices"]]
    return Comparison(
        pairs=d["pairs"],
        alpha=d["alpha"],
        metrics=metrics,
        slices=slices,
        masked_regressions=[s for s in slices if s.masked_regression],
        context=d.get("context", {}),
    )
