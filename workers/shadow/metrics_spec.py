"""What each compared outcome means: direction, how it is judged, its margin (see docs/shadow.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Judgement = Literal["superiority", "non_inferiority"]


@dataclass(frozen=True)
class MetricSpec:
    """How one outcome is compared.

    superiority: better/worse when the confidence sequence excludes 0;
    equivalent when it lies inside +/- margin (absolute units).
    non_inferiority (latency, cost, tokens): worse only when the increase is
    surely above margin x the production mean; equivalent (non-inferior) when
    its upper bound is below that.
    `effect` is the difference the power report asks about (absolute units;
    for non-inferiority, relative to the production mean, like margin).
    """

    name: str
    binary: bool
    higher_is_better: bool
    judgement: Judgement = "superiority"
    margin: float = 0.02
    effect: float = 0.05
    p95_ratio: bool = False

    @property
    def direction(self) -> float:
        return 1.0 if self.higher_is_better else -1.0


def _quality(name: str, binary: bool, higher: bool) -> MetricSpec:
    return MetricSpec(name, binary, higher)


def _resource(name: str, margin: float, p95: bool = False) -> MetricSpec:
    return MetricSpec(name, False, False, "non_inferiority", margin, margin, p95)


# The outcomes the shadow worker records per pair. Latency per stage is added
# for the configured stages (`latency_<stage>_seconds`).
BUILTIN_METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        _quality("faithfulness_score", False, True),
        _quality("faithful", True, True),
        _quality("refusal", True, False),
        _quality("uncited_answer", True, False),
        _quality("false_exclusion", True, False),
        _resource("latency_total_seconds", 0.10, p95=True),
        _resource("cost_usd", 0.10),
        _resource("tokens_total", 0.20),
    )
}


def spec_for(name: str, values_are_binary: bool) -> MetricSpec:
    """The builtin spec, a latency stage, or (offline data) a higher-is-better outcome."""
    if name in BUILTIN_METRICS:
        return BUILTIN_METRICS[name]
    if name.startswith("latency_") and name.endswith("_seconds"):
        return _resource(name, 0.10)  # per stage: the mean; the p95 ratio is for the total
    return _quality(name, values_are_binary, True)
