"""The release gate over a comparison: which verdicts fail it, and regression budgets per metric.

A metric fails the gate when its verdict is one of `fail_on` (default: worse, i.e. the candidate is
worse after Holm's correction), or when a budget is set for it and the regression is surely beyond
it. The regression is the change against the metric's direction (a drop in a quality metric, a rise
in latency or cost), in the metric's units; "surely" uses the same anytime-valid confidence sequence
as the verdicts:

- over budget: even the sequence's most favourable end regresses by more than the budget -> fails;
- within budget: even its least favourable end regresses by less -> passes;
- otherwise undecided: fails only when `inconclusive` is in `fail_on` (a strict gate that wants the
  data to show the candidate within budget).

A metric without data (not_enough_data) fails only when `not_enough_data` is in `fail_on`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from service.contracts.stats import json_finite
from workers.shadow.results import Comparison, MetricResult

VERDICTS = ("better", "worse", "equivalent", "inconclusive", "not_enough_data")
FAILABLE = ("worse", "inconclusive", "not_enough_data")


class GateError(ValueError):
    """A gate option that names an unknown verdict or metric, or a budget that is not a positive number."""


@dataclass
class GateCheck:
    metric: str
    verdict: str
    regression: float  # point estimate, in the metric's units (positive: the candidate is worse)
    regression_lower: float
    regression_upper: float
    budget: float | None
    budget_state: str  # within / over / undecided / no budget / no data
    failed: bool
    why: str


@dataclass
class GateResult:
    passed: bool
    fail_on: list[str]
    checks: list[GateCheck] = field(default_factory=list)

    def failures(self) -> list[GateCheck]:
        return [c for c in self.checks if c.failed]

    def to_dict(self) -> dict[str, Any]:
        return json_finite(asdict(self))


def parse_fail_on(text: str) -> list[str]:
    wanted = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in wanted if v not in FAILABLE]
    if not wanted or unknown:
        raise GateError(f"--fail-on: {unknown or text!r} is not a comma list of {', '.join(FAILABLE)}")
    return wanted


def parse_budgets(items: list[str]) -> dict[str, float]:
    budgets: dict[str, float] = {}
    for item in items:
        metric, sep, value = item.partition("=")
        try:
            delta = float(value) if sep else math.nan
        except ValueError:
            delta = math.nan
        if not metric or not math.isfinite(delta) or delta < 0:
            raise GateError(
                f"--budget {item!r}: must be METRIC=DELTA with DELTA a finite number >= 0 "
                "(the largest regression allowed, in the metric's units)"
            )
        if metric in budgets:
            raise GateError(f"--budget: metric {metric!r} is given twice")
        budgets[metric] = delta
    return budgets


def _regression(r: MetricResult) -> tuple[float, float, float]:
    """(point, lower, upper) of the regression: the change against the metric's direction."""
    direction = 1.0 if r.higher_is_better else -1.0
    ends = sorted((-r.cs_lower * direction, -r.cs_upper * direction))
    return -r.delta * direction, ends[0], ends[1]


def evaluate(comparison: Comparison, fail_on: list[str], budgets: dict[str, float]) -> GateResult:
    known = {r.metric for r in comparison.metrics}
    unknown = sorted(set(budgets) - known)
    if unknown:
        raise GateError(f"--budget: no metric {unknown} in this comparison (it has {sorted(known)})")
    result = GateResult(passed=True, fail_on=list(fail_on))
    for r in comparison.metrics:
        point, lower, upper = _regression(r)
        budget = budgets.get(r.metric)
        reasons = [f"verdict {r.verdict}"] if r.verdict in fail_on else []
        if r.verdict == "not_enough_data" or not (math.isfinite(lower) and math.isfinite(upper)):
            state = "no data"
        elif budget is None:
            state = "no budget"
        elif lower > budget:
            state = "over"
            reasons.append(f"regression surely above the budget {budget:g} (at least {lower:.4g})")
        elif upper < budget:
            state = "within"
        else:
            state = "undecided"
            if "inconclusive" in fail_on:
                reasons.append(f"regression may exceed the budget {budget:g} (up to {upper:.4g})")
        check = GateCheck(
            r.metric, r.verdict, point, lower, upper, budget, state, bool(reasons), "; ".join(reasons)
        )
        result.checks.append(check)
        result.passed = result.passed and not check.failed
    return result


def render_markdown(gate: GateResult) -> str:
    lines = [
        f"## Release gate: {'PASS' if gate.passed else 'FAIL'}",
        "",
        f"Fails on: {', '.join(gate.fail_on)}; budgets are the largest regression allowed, in each "
        "metric's units, judged on the anytime confidence sequence.",
        "",
        "| metric | verdict | regression | anytime CS of the regression | budget | budget check | gate |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in gate.checks:
        cs = (
            f"[{c.regression_lower:+.4g}, {c.regression_upper:+.4g}]"
            if math.isfinite(c.regression_lower) and math.isfinite(c.regression_upper)
            else "—"
        )
        point = f"{c.regression:+.4g}" if math.isfinite(c.regression) else "—"
        budget = "—" if c.budget is None else f"{c.budget:g}"
        verdict = f"**FAIL**: {c.why}" if c.failed else "pass"
        lines.append(
            f"| {c.metric} | {c.verdict} | {point} | {cs} | {budget} | {c.budget_state} | {verdict} |"
        )
    return "\n".join(lines)
