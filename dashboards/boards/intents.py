"""Every guardrail per intent (docs/intents.md): one intent's regression hides in the tenant's mean, so each
row shows a guardrail's signal per (tenant, intent) beside the sample it rests on (under the minimum an
intent is blind, not clean), and the tenant's line for comparison where it has one."""

from __future__ import annotations

from dashboards.common import Board, Limits
from dashboards.model import NO_STEPS, Panel, Row, Steps, bad_above, bad_below
from dashboards.panels import rate_with_sample, recorded, timeseries

UID = "ragmon-intents"
PER_INTENT = "{{tenant}} / {{intent}}"
TENANT_MEAN = "{{tenant}} (all intents)"


def _signal_and_sample(
    title: str,
    signal: str,
    samples: str,
    description: str,
    minimum: int,
    unit: str,
    thresholds: Steps = NO_STEPS,
    tenant: str | None = None,
    legend: str = PER_INTENT,
) -> list[Panel]:
    targets = [recorded(signal, legend)]
    if tenant is not None:
        targets.append(recorded(tenant, TENANT_MEAN))
    rate = timeseries(
        title, *targets, description=description, unit=unit, thresholds=thresholds, minimum=0, width=16
    )
    return rate_with_sample(
        rate,
        f"{title}: sample per intent",
        recorded(samples, legend),
        f"What the intent's value rests on in the window: under {minimum} the intent cannot page "
        "(blind, not clean); the tenant's own alert still sees it in the mean.",
    )


def _faithfulness(limits: Limits) -> list[Panel]:
    f = limits.guardrails.faithfulness
    return _signal_and_sample(
        f"Mean HHEM score by intent ({f.window}, floor {f.min_mean_score:g})",
        "ragmon:faithfulness_by_intent:mean",
        "ragmon:faithfulness_by_intent:samples",
        f"Each intent's mean faithfulness beside the tenant's. RagmonFaithfulnessLow pages for an intent below "
        f"the floor with at least {f.min_samples_per_intent} scored answers of it while the tenant's mean is not.",
        f.min_samples_per_intent,
        "none",
        bad_below(f.min_mean_score),
        "ragmon:faithfulness_score:mean",
    )


def _exclusion(limits: Limits) -> list[Panel]:
    e = limits.guardrails.false_exclusion
    return _signal_and_sample(
        f"False-exclusion rate by intent ({e.window}, limit {e.max_rate:.0%})",
        "ragmon:false_exclusion_by_intent:rate",
        "ragmon:false_exclusion_by_intent:eligible",
        "Queries whose eligible gold was all removed by relevance filters, per intent, beside the tenant's "
        f"rate; RagmonFalseExclusionHigh pages for an intent with at least {e.min_eligible_per_intent} "
        "eligible queries.",
        e.min_eligible_per_intent,
        "percentunit",
        bad_above(e.max_rate),
        "ragmon:false_exclusion:rate",
    )


def _latency(limits: Limits) -> list[Panel]:
    lat = limits.guardrails.latency
    q = round(lat.quantile * 100)
    slos = ", ".join(f"{s} {lat.slo_seconds[s]:g}s" for s in ("total", "ttft") if s in lat.slo_seconds)
    return _signal_and_sample(
        f"p{q} by intent: total and TTFT ({lat.window})",
        "ragmon:latency_by_intent:quantile",
        "ragmon:latency_by_intent:samples",
        f"What users of each intent wait for (SLOs {slos}); RagmonLatencyAboveSLO pages for an intent with "
        f"at least {lat.min_samples_per_intent} traces of it. Per-stage latency is per tenant (Latency & cost).",
        lat.min_samples_per_intent,
        "s",
        legend="{{tenant}} / {{intent}} / {{stage}}",
    )


def _cost(limits: Limits) -> list[Panel]:
    c = limits.guardrails.cost
    return _signal_and_sample(
        f"Mean cost per query by intent ({c.window}, budget ${c.max_mean_usd:g})",
        "ragmon:cost_by_intent:mean",
        "ragmon:cost_by_intent:samples",
        "Known cost (reported or estimated) per query of each intent, beside the tenant's mean; "
        f"RagmonCostPerQueryOverBudget opens a ticket for an intent with at least {c.min_samples_per_intent} "
        "costed queries.",
        c.min_samples_per_intent,
        "currencyUSD",
        bad_above(c.max_mean_usd),
        "ragmon:rag_cost_per_query_usd:mean",
    )


def _checks(limits: Limits) -> list[Panel]:
    ch = limits.guardrails.checks
    return _signal_and_sample(
        f"Answer checks: failure rate by intent and check ({ch.window})",
        "ragmon:check_by_intent:rate",
        "ragmon:check_by_intent:trials",
        "Which intent's answers fail a deterministic check (docs/checks.md). The alert is per check and "
        "tenant (Quality: answer checks); this view says where the failures come from.",
        ch.min_checked,
        "percentunit",
        bad_above(ch.max_rate),
        legend="{{tenant}} / {{intent}} / {{check}}",
    )


def _refusals_and_thumbs(limits: Limits) -> list[Panel]:
    r, t = limits.guardrails.refusal, limits.guardrails.thumbs_down
    return [
        *_signal_and_sample(
            f"Refusal rate by intent ({r.window})",
            "ragmon:refusal:rate",
            "ragmon:refusal:queries",
            "The refusal band's rate per intent (Quality: refusals by intent has the band itself); "
            "RagmonRefusalRateOutOfBand is per intent already.",
            r.min_n,
            "percentunit",
        ),
        *_signal_and_sample(
            f"Thumbs-down rate by intent ({t.window})",
            "ragmon:thumbs_down_by_intent:rate",
            "ragmon:thumbs_down_by_intent:trials",
            "Thumbs down over thumbs votes per intent; the thumbs-down band alerts per tenant (Feedback).",
            t.min_n,
            "percentunit",
        ),
    ]


def build(limits: Limits) -> Board:
    return Board(
        UID,
        "ragmon / Intents",
        "Every guardrail per intent (the configured intents, the rest `other`, no intent `none`): a "
        "regression on one intent pages with an `intent` label while the tenant's mean can still look fine.",
        [
            Row("Faithfulness by intent", _faithfulness(limits)),
            Row("False exclusion by intent", _exclusion(limits)),
            Row("Latency by intent", _latency(limits)),
            Row("Cost by intent", _cost(limits)),
            Row("Answer checks by intent", _checks(limits)),
            Row("Refusals and thumbs down by intent", _refusals_and_thumbs(limits)),
        ],
        tags=("quality", "intents"),
    )
