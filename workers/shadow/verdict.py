"""Verdict per metric from the anytime-valid confidence sequence, and the power report.

better / worse / equivalent / inconclusive / not_enough_data. Quality metrics
are judged for superiority (Holm-adjusted anytime p-value across the metrics
of the comparison, equivalence when the sequence lies inside +/- margin);
latency, cost and tokens for non-inferiority (worse only when the increase is
surely above margin x the production mean). See docs/shadow.md.
"""

from __future__ import annotations

import math

from workers.shadow.metrics_spec import MetricSpec
from workers.shadow.power import (
    mean_detectable,
    mean_pairs_needed,
    sign_test_detectable,
    sign_test_pairs_needed,
)
from workers.shadow.results import MetricResult


def judge(
    r: MetricResult, spec: MetricSpec, alpha: float, min_pairs: int, min_discordant: int
) -> tuple[str, str]:
    if r.n < min_pairs:
        return "not_enough_data", f"{r.n} pairs < {min_pairs}"
    # gain = improvement in the metric's direction; its bounds from the confidence sequence
    gain_lo, gain_hi = sorted((r.cs_lower * spec.direction, r.cs_upper * spec.direction))
    few_discordant = spec.binary and r.wins + r.losses < min_discordant
    significant = r.anytime_p_holm <= alpha and not few_discordant
    gain = r.delta * spec.direction
    if spec.judgement == "non_inferiority":
        allowed = spec.margin * abs(r.production_mean)
        if -gain_hi > allowed:
            return "worse", f"increase surely above the {spec.margin:.0%} margin"
        if significant and gain > 0:
            return "better", "decrease excludes 0 (anytime, Holm)"
        if -gain_lo < allowed:
            return "equivalent", f"non-inferior: increase surely below the {spec.margin:.0%} margin"
        return "inconclusive", "increase may exceed the margin"
    if significant:
        return (
            ("better", "difference excludes 0 (anytime, Holm)")
            if gain > 0
            else ("worse", "difference excludes 0 (anytime, Holm)")
        )
    if -spec.margin < gain_lo and gain_hi < spec.margin:
        return "equivalent", f"within +/-{spec.margin:g}"
    if few_discordant:
        return "not_enough_data", f"{r.wins + r.losses} discordant pairs < {min_discordant}"
    return "inconclusive", "sequence includes 0 and leaves the margin"


def attach_power(r: MetricResult, spec: MetricSpec, alpha: float, power: float) -> None:
    """Smallest effect detectable at `power` with the current pairs, and pairs needed for spec.effect."""
    if spec.judgement == "non_inferiority":
        r.effect_of_interest = (
            spec.effect * abs(r.production_mean) if math.isfinite(r.production_mean) else math.nan
        )
    else:
        r.effect_of_interest = spec.effect
    if r.n == 0:
        return
    if spec.binary:
        discordance = (r.wins + r.losses) / r.n
        r.detectable_effect = sign_test_detectable(r.n, discordance, alpha, power)
        r.pairs_needed = sign_test_pairs_needed(
            discordance, min(r.effect_of_interest, discordance), alpha, power
        )
    elif math.isfinite(r.sd) and math.isfinite(r.effect_of_interest):
        r.detectable_effect = mean_detectable(r.n, r.sd, alpha, power)
        r.pairs_needed = mean_pairs_needed(r.sd, r.effect_of_interest, alpha, power)
