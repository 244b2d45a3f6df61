"""Latency per RAG stage against its SLO, and cost per query against its budget."""

from __future__ import annotations

from dashboards.common import Board, Limits
from dashboards.model import Panel, Row, Target, bad_above
from dashboards.promql import TV, per_second, quantile, sel, share

UID = "ragmon-latency-cost"
SERIES = "{{tenant}} / {{variant}}"
STAGE_HISTOGRAM = "ragmon_rag_stage_duration_seconds"


def _stage_panels(limits: Limits) -> list[Panel]:
    lat = limits.guardrails.latency
    q = f"p{round(lat.quantile * 100)}"
    return [
        Panel(
            f"{q} {stage} (SLO {slo:g}s)",
            "timeseries",
            [Target(sel("ragmon:rag_stage_duration_seconds:quantile", TV, f'stage="{stage}"'), SERIES)],
            description=f"{q} over {lat.window} (recording rule), alerting above the stage's SLO with at least "
            f"{lat.min_samples} traces. Default SLO shown; tenants may override it.",
            unit="s",
            thresholds=bad_above(slo),
            width=8,
        )
        for stage, slo in sorted(lat.slo_seconds.items())
    ]


def _live_latency() -> list[Panel]:
    total = ('stage="total"',)
    traces = per_second("ragmon_rag_queries_total", "variant", TV)
    return [
        Panel(
            "Total latency quantiles (live)",
            "timeseries",
            [
                Target(quantile(q, STAGE_HISTOGRAM, "", TV, *total), f"p{round(q * 100)}")
                for q in (0.5, 0.95, 0.99)
            ],
            description="From the histogram at the dashboard's resolution, across the selected tenants and variants.",
            unit="s",
            width=12,
        ),
        Panel(
            "p95 by stage (live)",
            "timeseries",
            [Target(quantile(0.95, STAGE_HISTOGRAM, "stage", TV), "{{stage}}")],
            unit="s",
            width=12,
        ),
        Panel(
            "Traces per second by variant",
            "timeseries",
            [
                Target(per_second("ragmon_rag_queries_total", "variant", TV), "{{variant}} (sampled)"),
                Target(
                    per_second("ragmon_rag_queries_estimated_total", "variant", TV),
                    "{{variant}} (estimated real)",
                ),
            ],
            description="Sampled traces, and the traffic they stand for (each weighted by 1/sample_rate).",
            unit="reqps",
            width=12,
        ),
        Panel(
            "Refused and uncited answers",
            "timeseries",
            [
                Target(
                    share(per_second("ragmon_rag_refusals_total", "variant", TV), traces),
                    "refused {{variant}}",
                ),
                Target(
                    share(per_second("ragmon_rag_uncited_answers_total", "variant", TV), traces),
                    "uncited {{variant}}",
                ),
            ],
            unit="percentunit",
            minimum=0,
            width=12,
        ),
    ]


def _cost_panels(limits: Limits) -> list[Panel]:
    cost = limits.guardrails.cost
    return [
        Panel(
            f"Mean cost per query ({cost.window}, budget ${cost.max_mean_usd:g})",
            "timeseries",
            [Target(sel("ragmon:rag_cost_per_query_usd:mean", TV), SERIES)],
            description=f"Recording rule; alerts above the budget with at least {cost.min_samples} costed traces.",
            unit="currencyUSD",
            decimals=4,
            thresholds=bad_above(cost.max_mean_usd),
            width=12,
        ),
        Panel(
            "Estimated spend per hour",
            "timeseries",
            [
                Target(
                    f"{per_second('ragmon_rag_cost_estimated_usd_total', 'tenant, variant', TV)} * 3600",
                    SERIES,
                )
            ],
            description="Cost of the sampled traces re-weighted by 1/sample_rate: the application's real spend.",
            unit="currencyUSD",
            decimals=2,
            width=12,
        ),
        Panel(
            "p95 cost per query by source",
            "timeseries",
            [Target(quantile(0.95, "ragmon_rag_cost_per_query_usd", "source", TV), "{{source}}")],
            description="`reported` by the app, `estimated` from the configured price table.",
            unit="currencyUSD",
            decimals=4,
            width=8,
        ),
        Panel(
            "Costed traces by source",
            "timeseries",
            [Target(per_second("ragmon_rag_cost_queries_total", "source", TV), "{{source}}")],
            description="`unknown`: neither a reported cost nor a known model price; those traces are not in the mean.",
            unit="reqps",
            stacked=True,
            width=8,
        ),
        Panel(
            "Tokens per second by kind and model",
            "timeseries",
            [Target(per_second("ragmon_rag_tokens_total", "kind, model", TV), "{{kind}} {{model}}")],
            unit="short",
            stacked=True,
            width=8,
        ),
    ]


def build(limits: Limits) -> Board:
    return Board(
        UID,
        "ragmon / Latency and cost",
        "Per-stage latency against its SLO (recording rules, as the alerts see it), live quantiles, and cost "
        "per query against the budget.",
        [
            Row("Latency against SLO, by stage", _stage_panels(limits)),
            Row("Latency and traffic (live)", _live_latency()),
            Row("Cost", _cost_panels(limits)),
        ],
        tags=("latency", "cost"),
    )
