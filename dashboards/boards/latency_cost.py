"""Latency per RAG stage against its SLO, and cost per query against its budget."""

from __future__ import annotations

from dashboards.common import Board, Limits, p95_panel, quantile_lines
from dashboards.model import Panel, Row, Target, bad_above
from dashboards.panels import counter, per_second_panel, recorded, seconds_panel, share_panel, timeseries
from dashboards.promql import TV, per_second, quantile, share

UID = "ragmon-latency-cost"
SERIES = "{{tenant}} / {{variant}}"
STAGE_HISTOGRAM = "ragmon_rag_stage_duration_seconds"


def _stage_panels(limits: Limits) -> list[Panel]:
    lat = limits.guardrails.latency
    q = f"p{round(lat.quantile * 100)}"
    return [
        seconds_panel(
            f"{q} {stage} (SLO {slo:g}s)",
            recorded("ragmon:rag_stage_duration_seconds:quantile", SERIES, f'stage="{stage}"'),
            description=f"{q} over {lat.window} (recording rule), alerting above the stage's SLO with at least "
            f"{lat.min_samples} traces. Default SLO shown; tenants may override it.",
            thresholds=bad_above(slo),
        )
        for stage, slo in sorted(lat.slo_seconds.items())
    ]


def _live_latency() -> list[Panel]:
    traces = per_second("ragmon_rag_queries_total", "variant", TV)

    def of_traces(metric: str, legend: str) -> Target:
        return Target(share(per_second(metric, "variant", TV), traces), legend)

    return [
        seconds_panel(
            "Total latency quantiles (live)",
            *quantile_lines(STAGE_HISTOGRAM, TV, 'stage="total"'),
            description="From the histogram at the dashboard's resolution, across the selected tenants and variants.",
            width=12,
        ),
        p95_panel("p95 by stage (live)", STAGE_HISTOGRAM, "stage", "{{stage}}", TV, width=12),
        per_second_panel(
            "Traces per second by variant",
            counter("ragmon_rag_queries_total", "variant", "{{variant}} (sampled)", TV),
            counter("ragmon_rag_queries_estimated_total", "variant", "{{variant}} (estimated real)", TV),
            description="Sampled traces, and the traffic they stand for (each weighted by 1/sample_rate).",
            stacked=False,
            width=12,
        ),
        share_panel(
            "Refused and uncited answers",
            of_traces("ragmon_rag_refusals_total", "refused {{variant}}"),
            of_traces("ragmon_rag_uncited_answers_total", "uncited {{variant}}"),
            width=12,
        ),
    ]


def _cost_panels(limits: Limits) -> list[Panel]:
    cost = limits.guardrails.cost
    spend = f"{per_second('ragmon_rag_cost_estimated_usd_total', 'tenant, variant', TV)} * 3600"
    return [
        timeseries(
            f"Mean cost per query ({cost.window}, budget ${cost.max_mean_usd:g})",
            recorded("ragmon:rag_cost_per_query_usd:mean", SERIES),
            description=f"Recording rule; alerts above the budget with at least {cost.min_samples} costed traces.",
            unit="currencyUSD",
            decimals=4,
            thresholds=bad_above(cost.max_mean_usd),
            width=12,
        ),
        timeseries(
            "Estimated spend per hour",
            Target(spend, SERIES),
            description="Cost of the sampled traces re-weighted by 1/sample_rate: the application's real spend.",
            unit="currencyUSD",
            decimals=2,
            width=12,
        ),
        timeseries(
            "p95 cost per query by source",
            Target(quantile(0.95, "ragmon_rag_cost_per_query_usd", "source", TV), "{{source}}"),
            description="`reported` by the app, `estimated` from the configured price table.",
            unit="currencyUSD",
            decimals=4,
        ),
        per_second_panel(
            "Costed traces by source",
            counter("ragmon_rag_cost_queries_total", "source", "{{source}}", TV),
            description="`unknown`: neither a reported cost nor a known model price; those traces are not in the mean.",
        ),
        per_second_panel(
            "Tokens per second by kind and model",
            counter("ragmon_rag_tokens_total", "kind, model", "{{kind}} {{model}}", TV),
            unit="short",
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
