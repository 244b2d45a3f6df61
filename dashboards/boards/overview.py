"""Guardrails overview: one stat per guardrail, coloured by its alert threshold, and the active alerts."""

from __future__ import annotations

from typing import Unpack

from dashboards.common import Board, Limits
from dashboards.model import Panel, Row, Target, bad_above, bad_below
from dashboards.panels import Options, counter, per_second_panel, recorded, stat, table
from dashboards.promql import RANGE_WINDOW, TENANT, TV, across_replicas, sel, zero_when_absent
from service.rules.config import GuardrailsConfig

UID = "ragmon-overview"
# Alerts of the selected tenants and variants, and those that carry no tenant (the pipeline's own).
ALERT_SCOPE = 'tenant=~"$tenant|", variant=~"$variant|"'
FIRING = 'alertstate="firing"'
SERIES = "{{tenant}} / {{variant}}"


def _guardrail(title: str, target: Target, **options: Unpack[Options]) -> Panel:
    """One stat per guardrail, coloured by its alert threshold: the overview's tiles are all 6 by 6."""
    options.setdefault("width", 6)
    options.setdefault("height", 6)
    return stat(title, target, **options)


def _rate_guardrail(title: str, series: str, description: str, limit: float, no_value: str) -> Panel:
    """A rate guardrail's tile: the recorded share against its limit, and what an empty denominator means."""
    return _guardrail(
        title,
        recorded(series, SERIES),
        description=description,
        unit="percentunit",
        thresholds=bad_above(limit),
        minimum=0,
        maximum=1,
        no_value=no_value,
    )


def _breakdown(title: str, target: Target, description: str) -> Panel:
    """Per second by the labels that say why, stacked, beside the guardrail tile it explains."""
    return per_second_panel(title, target, description=description, minimum=0, width=6, height=6)


def _answer_quality(g: GuardrailsConfig) -> list[Panel]:
    fai, exc, reg = g.faithfulness, g.false_exclusion, g.regeneration
    distance = (
        f"abs({sel('ragmon:regeneration:rate', TV)} - {sel('ragmon:regeneration:baseline_rate', TV)})"
        f" / {sel('ragmon:regeneration:band_half_width', TV)}"
    )
    # 1 when any intent or model of the signal drifted, on any replica's copy of the shared result
    drift = across_replicas("ragmon_drift_detected", "tenant, signal", TENANT)
    return [
        _guardrail(
            f"Faithfulness: mean HHEM score ({fai.window})",
            recorded("ragmon:faithfulness_score:mean", SERIES),
            description=f"Pages below {fai.min_mean_score} with at least {fai.min_samples} scored answers "
            "(default floor; tenants may override it).",
            thresholds=bad_below(fai.min_mean_score),
            minimum=0,
            maximum=1,
            decimals=2,
        ),
        _rate_guardrail(
            f"False exclusion rate ({exc.window})",
            "ragmon:false_exclusion:rate",
            "Queries whose entitled gold was all removed by relevance filters, over queries with "
            f"eligible gold (alert above {exc.max_rate:.0%} with at least {exc.min_eligible} "
            "eligible). No data means no evidence, not 0%.",
            exc.max_rate,
            "no evidence",
        ),
        _guardrail(
            "Regeneration: distance from baseline, in band widths",
            Target(distance, SERIES),
            description=f"|rate − baseline| / ({reg.sigmas:g}·√(p̄(1−p̄)(1/n + 1/n_b))): 1 is the edge of the "
            "control band. "
            f"Needs a baseline ({reg.baseline_window} ending {reg.baseline_offset} ago).",
            thresholds=bad_above(1),
            decimals=2,
            no_value="no baseline",
        ),
        _guardrail(
            "Query drift detected",
            Target(drift, "{{tenant}} / {{signal}}"),
            description="1 when the last MMD² permutation test rejected 'same distribution' at the configured alpha.",
            thresholds=bad_above(1),
            mappings=(("0", "stable", "green"), ("1", "drift", "red")),
        ),
    ]


def _errors(g: GuardrailsConfig) -> list[Panel]:
    """Failed requests and truncated answers beside the quality row: an outage is not a quality drop
    (docs/errors.md); failed requests are in none of the quality panels above."""
    err, trunc = g.errors, g.truncation
    return [
        _rate_guardrail(
            f"Failed requests ({err.window})",
            "ragmon:errors:rate",
            f"Requests whose trace carries an error, over all requests (page above {err.max_rate:.0%} "
            f"with at least {err.min_errors} failures). Failed requests are kept out of faithfulness, "
            "exclusion and latency: while this is red, read those as the answered requests only.",
            err.max_rate,
            "no requests",
        ),
        _breakdown(
            "Errors by stage and type",
            counter("ragmon_rag_errors_total", "tenant, stage, type", "{{tenant}} {{stage}} {{type}}", TV),
            "Failed requests per second by the stage that failed and the error type (timeout, "
            "rate_limit, provider_error, content_filter, context_length, other).",
        ),
        _rate_guardrail(
            f"Truncated answers ({trunc.window})",
            "ragmon:truncation:rate",
            f"Answers that stopped at the token limit (finish_reason length) over the answers that "
            f"gave a finish reason (alert above {trunc.max_rate:.0%} with at least {trunc.min_answers}). No "
            "finish reasons sent: no data, not 0%.",
            trunc.max_rate,
            "no finish reasons",
        ),
        _breakdown(
            "Finish reasons",
            counter("ragmon_rag_finish_reasons_total", "tenant, reason", "{{tenant}} {{reason}}", TV),
            "Answers per second by why the generation stopped (stop, length, content_filter, "
            "tool_calls, other).",
        ),
    ]


def _service(g: GuardrailsConfig) -> list[Panel]:
    lat, cost = g.latency, g.cost
    total_slo = lat.slo_seconds.get("total", max(lat.slo_seconds.values()))
    leaks = counter(
        "ragmon_exclusion_leaks_total", "tenant", "{{tenant}}", TENANT, fn="increase", window=RANGE_WINDOW
    )
    return [
        _guardrail(
            f"p{round(lat.quantile * 100)} total latency ({lat.window})",
            recorded("ragmon:rag_stage_duration_seconds:quantile", SERIES, 'stage="total"'),
            description="End-to-end latency against its SLO; the Latency and cost dashboard has every stage.",
            unit="s",
            thresholds=bad_above(total_slo),
        ),
        _guardrail(
            f"Cost per query ({cost.window} mean)",
            recorded("ragmon:rag_cost_per_query_usd:mean", SERIES),
            description=f"Mean cost per query against the budget (${cost.max_mean_usd} by default).",
            unit="currencyUSD",
            thresholds=bad_above(cost.max_mean_usd),
            decimals=4,
        ),
        _guardrail(
            "Entitlement leaks (dashboard range)",
            leaks,
            description="Documents outside the tenant's entitlement that reached retrieval: a security event, "
            "paged on the first one.",
            thresholds=bad_above(1),
            decimals=0,
        ),
        _guardrail(
            "Alerts firing",
            Target(zero_when_absent(f"count({sel('ALERTS', ALERT_SCOPE, FIRING)})"), "firing"),
            description="Alerts of the selected tenants and variants, plus the pipeline's own.",
            thresholds=bad_above(1),
            decimals=0,
        ),
    ]


def build(limits: Limits) -> Board:
    alerts = table(
        "Active alerts",
        Target(
            "max by (alertname, alertstate, severity, category, guardrail, tenant, variant) "
            f"({sel('ALERTS', ALERT_SCOPE)})",
            instant=True,
        ),
        description="Pending and firing alerts. Each alert's triage annotation says whether a release of "
        "its tenant went out shortly before it (a regression) or not (drift).",
        hidden_columns=("Time", "Value"),
        width=24,
        height=8,
    )
    g = limits.guardrails
    return Board(
        UID,
        "ragmon / Guardrails overview",
        "The guardrails, drift and entitlement leaks, each coloured by its alert threshold, failed requests "
        "beside them (an outage is not a quality drop), and the alerts pending or firing now.",
        [
            Row("Answer quality", _answer_quality(g)),
            Row("Failed requests and truncated answers (not quality)", _errors(g)),
            Row("Latency, cost and security", _service(g)),
            Row("Alerts", [alerts]),
        ],
        tags=("guardrails",),
    )
