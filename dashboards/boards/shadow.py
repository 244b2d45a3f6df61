"""Shadow evaluation: each candidate against production on the same requests (paired statistics).

Every replica of the shadow worker exports the same stored comparison, so
queries take max over replicas. Candidates never page: the only alert here is
RagmonShadowCandidateWorse, a ticket.
"""

from __future__ import annotations

from dashboards.common import Board, Limits, p95_panel
from dashboards.model import Override, Panel, Row, Target, bad_above
from dashboards.panels import (
    DASH,
    count_panel,
    counter,
    failures_panel,
    per_second_panel,
    ratio_panel,
    seconds_panel,
    table,
    timeseries,
)
from dashboards.promql import TENANT, across_replicas

UID = "ragmon-shadow"
WHOLE = 'slice="all"'
COMPARISON = "tenant, candidate, metric"
SERIES = "{{candidate}} {{metric}}"
# An interval's bounds, dashed beside the line they bound.
BOUNDS_DASHED = Override("^(lower|upper) .*", (DASH,))


def _max(metric: str, by: str, *matchers: str) -> str:
    return across_replicas(metric, by, TENANT, *matchers)


def _verdicts(limits: Limits) -> list[Panel]:
    def interval(method: str) -> tuple[Target, Target]:
        m = f'method="{method}"'
        return (
            Target(_max("ragmon_shadow_interval_lower", COMPARISON, WHOLE, m), "lower " + SERIES),
            Target(_max("ragmon_shadow_interval_upper", COMPARISON, WHOLE, m), "upper " + SERIES),
        )

    outcomes = ("ragmon_shadow_wins", "ragmon_shadow_losses", "ragmon_shadow_ties")
    return [
        table(
            "Verdict per candidate and metric",
            Target(f"{_max('ragmon_shadow_verdict', COMPARISON + ', verdict')} == 1", instant=True),
            description="better / worse / equivalent / inconclusive / not_enough_data, from the anytime-valid "
            "confidence sequence with Holm's correction across the metrics of a candidate; latency, "
            f"cost and tokens judged as non-inferiority. 'worse' for {limits.guardrails.shadow.for_} "
            "opens RagmonShadowCandidateWorse (a ticket to the candidate's owners, never a page).",
            hidden_columns=("Time", "Value"),
            width=12,
            height=9,
        ),
        timeseries(
            "Difference and its anytime interval",
            Target(_max("ragmon_shadow_delta", COMPARISON, WHOLE), "Δ " + SERIES),
            *interval("anytime"),
            description="Candidate minus production over the window's pairs, in each metric's units. The dashed "
            "bounds are the confidence sequence: valid however often this is looked at.",
            overrides=(BOUNDS_DASHED,),
            width=12,
            height=9,
        ),
        timeseries(
            "Fixed-n bootstrap interval (shown, not used for the verdict)",
            *interval("bootstrap"),
            description="Paired bootstrap 95% percentile interval. Checked after every batch it would cross zero by "
            "chance far more often than 5% (docs/shadow.md, calibration).",
        ),
        timeseries(
            "Wins, losses, ties",
            *(
                Target(_max(name, COMPARISON, WHOLE), f"{name.rsplit('_', 1)[1]} " + SERIES)
                for name in outcomes
            ),
            description="Pairs where the candidate did better / worse / the same (by the metric's direction). "
            "Only the discordant pairs carry information.",
            decimals=0,
        ),
        ratio_panel(
            "p-values: exact sign test and anytime (Holm)",
            Target(_max("ragmon_shadow_p_value_ratio", COMPARISON + ", test", WHOLE), "{{test}} " + SERIES),
            decimals=3,
        ),
    ]


def _slices() -> list[Panel]:
    by = COMPARISON + ", slice"
    return [
        table(
            "Regressions hidden by the average",
            Target(f"sort_desc({_max('ragmon_shadow_masked_regression', by)})", instant=True),
            Target(_max("ragmon_shadow_slice_pairs", by, 'slice!="all"'), instant=True),
            description="1: the slice is worse while the whole is better (flagged ones first). A small slice is a "
            "lead to follow (add pairs of it), not a verdict: read its pairs beside it.",
            hidden_columns=("Time",),
            width=12,
            height=9,
        ),
        timeseries(
            "Difference by slice",
            Target(_max("ragmon_shadow_delta", by, 'slice!="all"'), "{{slice}} " + SERIES),
            description="Per intent and configured metadata field; each slice has its own bootstrap interval.",
            width=12,
            height=9,
        ),
    ]


def _coverage() -> list[Panel]:
    pair = "tenant, candidate"

    def coverage(metric: str, legend: str) -> Target:
        return Target(_max(metric, pair), legend + " {{candidate}}")

    return [
        ratio_panel(
            "Coverage: production requests with a twin, against the configured shadow rate",
            coverage("ragmon_shadow_coverage_ratio", "measured"),
            coverage("ragmon_shadow_coverage_interval_lower_ratio", "lower"),
            coverage("ragmon_shadow_coverage_interval_upper_ratio", "upper"),
            coverage("ragmon_shadow_expected_coverage_ratio", "configured"),
            description="Measured share of production requests (since the candidate's first event) with a twin, its "
            "exact binomial interval (dashed), and the configured shadow rate (expected_shadow_rate). "
            "The configured rate outside the interval: pairs are being lost, or the app shadows another "
            "share than configured.",
            overrides=(BOUNDS_DASHED,),
            unit="percentunit",
            width=12,
            height=9,
        ),
        table(
            "Coverage far from the configured shadow rate",
            Target(f"sort_desc({_max('ragmon_shadow_coverage_mismatch_detected', pair)})", instant=True),
            description="1: the configured shadow rate lies outside the coverage's exact binomial interval "
            "(confidence 1 - coverage_alpha, 99.9% by default; it narrows as traffic accumulates, so a "
            "small gap on little traffic is not flagged). Candidates without a configured rate are not "
            "listed.",
            mappings=(("0", "consistent", "green"), ("1", "far off", "red")),
            hidden_columns=("Time",),
            width=12,
            height=9,
        ),
        timeseries(
            "Unpaired traces",
            Target(_max("ragmon_shadow_unpaired_traces", pair + ", role"), "{{candidate}} {{role}}"),
            decimals=0,
        ),
        timeseries(
            "Pairs in the window",
            Target(_max("ragmon_shadow_window_pairs", pair), "{{candidate}}"),
            decimals=0,
        ),
    ]


def _power_and_cost() -> list[Panel]:
    production_p95 = _max("ragmon_shadow_production_latency_p95_duration_seconds", "tenant, period")

    def candidates(metric: str) -> Target:
        """Candidates per tenant that left or never entered: 0, not no data, while none has."""
        return counter(metric, "tenant", "{{tenant}}", TENANT, zero="", fn="increase")

    return [
        timeseries(
            "Smallest difference detectable at 80% power",
            Target(_max("ragmon_shadow_detectable_effect", COMPARISON), SERIES),
            description="With the current pairs and discordance; larger than the effect you care about means the "
            "comparison cannot see it yet.",
        ),
        timeseries(
            "Pairs still needed for the effect of interest",
            Target(_max("ragmon_shadow_pairs_needed", COMPARISON), SERIES),
            decimals=0,
        ),
        seconds_panel(
            "Production p95 latency before and during shadowing",
            Target(production_p95, "{{tenant}} {{period}}"),
            description="The shadow must not slow production: compare 'during' with 'before'.",
        ),
        per_second_panel(
            "Pairs formed",
            counter("ragmon_shadow_pairs_formed_total", "tenant", "{{tenant}}", TENANT),
            stacked=False,
        ),
        p95_panel(
            "Recompute duration p95",
            "ragmon_shadow_recompute_duration_seconds",
            "tenant",
            "{{tenant}}",
            TENANT,
            thresholds=bad_above(5),
        ),
        failures_panel(
            "Candidates refused (over the per-tenant limit)",
            candidates("ragmon_shadow_candidates_refused_total"),
        ),
        count_panel(
            "Candidates expired (no event within the window)",
            candidates("ragmon_shadow_candidates_expired_total"),
            description="A candidate with no shadow event for `shadow.candidate_window_s` leaves: its pairs and "
            "series are removed and its place is free (docs/series-budget.md).",
            decimals=0,
        ),
    ]


def build(limits: Limits) -> Board:
    return Board(
        UID,
        "ragmon / Shadow",
        "Candidates run beside production on the same requests and are compared pair by pair: wins, losses, "
        "intervals, verdicts, slices, coverage and power. Candidates never page.",
        [
            Row("Verdicts", _verdicts(limits)),
            Row("Slices", _slices()),
            Row("Coverage and power", [*_coverage(), *_power_and_cost()]),
        ],
        tags=("shadow",),
    )
