"""Guardrails overview: one stat per guardrail, coloured by its alert threshold, and the active alerts."""

from __future__ import annotations

from dashboards.common import Board, Limits
from dashboards.model import Panel, Row, Target, bad_above, bad_below
from dashboards.promql import RANGE_WINDOW, TENANT, TV, per_second, sel
from service.rules.config import GuardrailsConfig

UID = "ragmon-overview"
# Alerts of the selected tenants and variants, and those that carry no tenant (the pipeline's own).
ALERT_SCOPE = 'tenant=~"$tenant|", variant=~"$variant|"'
FIRING = 'alertstate="firing"'
SERIES = "{{tenant}} / {{variant}}"


def _answer_quality(g: GuardrailsConfig) -> list[Panel]:
    fai, exc, reg = g.faithfulness, g.false_exclusion, g.regeneration
    distance = (
        f"abs({sel('ragmon:regeneration:rate', TV)} - {sel('ragmon:regeneration:baseline_rate', TV)})"
        f" / {sel('ragmon:regeneration:band_half_width', TV)}"
    )
    return [
        Panel(
            f"Faithfulness: mean HHEM score ({fai.window})",
            "stat",
            [Target(sel("ragmon:faithfulness_score:mean", TV), SERIES)],
            description=f"Pages below {fai.min_mean_score} with at least {fai.min_samples} scored answers "
            "(default floor; tenants may override it).",
            thresholds=bad_below(fai.min_mean_score),
            minimum=0,
            maximum=1,
            decimals=2,
            width=6,
            height=6,
        ),
        Panel(
            f"False exclusion rate ({exc.window})",
            "stat",
            [Target(sel("ragmon:false_exclusion:rate", TV), SERIES)],
            description="Queries whose entitled gold was all removed by relevance filters, over queries with "
            f"eligible gold (alert above {exc.max_rate:.0%} with at least {exc.min_eligible} "
            "eligible). No data means no evidence, not 0%.",
            unit="percentunit",
            thresholds=bad_above(exc.max_rate),
            minimum=0,
            maximum=1,
            no_value="no evidence",
            width=6,
            height=6,
        ),
        Panel(
            "Regeneration: distance from baseline, in band widths",
            "stat",
            [Target(distance, SERIES)],
            description=f"|rate − baseline| / ({reg.sigmas:g}·√(p̄(1−p̄)(1/n + 1/n_b))): 1 is the edge of the "
            "control band. "
            f"Needs a baseline ({reg.baseline_window} ending {reg.baseline_offset} ago).",
            thresholds=bad_above(1),
            decimals=2,
            no_value="no baseline",
            width=6,
            height=6,
        ),
        Panel(
            "Query drift detected",
            "stat",
            [
                Target(
                    f"max by (tenant, signal) ({sel('ragmon_drift_detected', TENANT)})",
                    "{{tenant}} / {{signal}}",
                )
            ],
            description="1 when the last MMD² permutation test rejected 'same distribution' at the configured alpha.",
            thresholds=bad_above(1),
            mappings=(("0", "stable", "green"), ("1", "drift", "red")),
            width=6,
            height=6,
        ),
    ]


def _errors(g: GuardrailsConfig) -> list[Panel]:
    """Failed requests and truncated answers beside the quality row: an outage is not a quality drop
    (docs/errors.md); failed requests are in none of the quality panels above."""
    err, trunc = g.errors, g.truncation
    return [
        Panel(
            f"Failed requests ({err.window})",
            "stat",
            [Target(sel("ragmon:errors:rate", TV), SERIES)],
            description=f"Requests whose trace carries an error, over all requests (page above {err.max_rate:.0%} "
            f"with at least {err.min_errors} failures). Failed requests are kept out of faithfulness, "
            "exclusion and latency: while this is red, read those as the answered requests only.",
            unit="percentunit",
            thresholds=bad_above(err.max_rate),
            minimum=0,
            maximum=1,
            no_value="no requests",
            width=6,
            height=6,
        ),
        Panel(
            "Errors by stage and type",
            "timeseries",
            [
                Target(
                    per_second("ragmon_rag_errors_total", "tenant, stage, type", TV),
                    "{{tenant}} {{stage}} {{type}}",
                )
            ],
            description="Failed requests per second by the stage that failed and the error type (timeout, "
            "rate_limit, provider_error, content_filter, context_length, other).",
            unit="reqps",
            minimum=0,
            stacked=True,
            width=6,
            height=6,
        ),
        Panel(
            f"Truncated answers ({trunc.window})",
            "stat",
            [Target(sel("ragmon:truncation:rate", TV), SERIES)],
            description=f"Answers that stopped at the token limit (finish_reason length) over the answers that "
            f"gave a finish reason (alert above {trunc.max_rate:.0%} with at least {trunc.min_answers}). No "
            "finish reasons sent: no data, not 0%.",
            unit="percentunit",
            thresholds=bad_above(trunc.max_rate),
            minimum=0,
            maximum=1,
            no_value="no finish reasons",
            width=6,
            height=6,
        ),
        Panel(
            "Finish reasons",
            "timeseries",
            [
                Target(
                    per_second("ragmon_rag_finish_reasons_total", "tenant, reason", TV),
                    "{{tenant}} {{reason}}",
                )
            ],
            description="Answers per second by why the generation stopped (stop, length, content_filter, "
            "tool_calls, other).",
            unit="reqps",
            minimum=0,
            stacked=True,
            width=6,
            height=6,
        ),
    ]


def _service(g: GuardrailsConfig) -> list[Panel]:
    lat, cost = g.latency, g.cost
    total_slo = lat.slo_seconds.get("total", max(lat.slo_seconds.values()))
    return [
        Panel(
            f"p{round(lat.quantile * 100)} total latency ({lat.window})",
            "stat",
            [Target(sel("ragmon:rag_stage_duration_seconds:quantile", TV, 'stage="total"'), SERIES)],
            description="End-to-end latency against its SLO; the Latency and cost dashboard has every stage.",
            unit="s",
            thresholds=bad_above(total_slo),
            width=6,
            height=6,
        ),
        Panel(
            f"Cost per query ({cost.window} mean)",
            "stat",
            [Target(sel("ragmon:rag_cost_per_query_usd:mean", TV), SERIES)],
            description=f"Mean cost per query against the budget (${cost.max_mean_usd} by default).",
            unit="currencyUSD",
            thresholds=bad_above(cost.max_mean_usd),
            decimals=4,
            width=6,
            height=6,
        ),
        Panel(
            "Entitlement leaks (dashboard range)",
            "stat",
            [
                Target(
                    per_second(
                        "ragmon_exclusion_leaks_total", "tenant", TENANT, fn="increase", window=RANGE_WINDOW
                    ),
                    "{{tenant}}",
                )
            ],
            description="Documents outside the tenant's entitlement that reached retrieval: a security event, "
            "paged on the first one.",
            thresholds=bad_above(1),
            decimals=0,
            width=6,
            height=6,
        ),
        Panel(
            "Alerts firing",
            "stat",
            [Target(f"count({sel('ALERTS', ALERT_SCOPE, FIRING)}) or vector(0)", "firing")],
            description="Alerts of the selected tenants and variants, plus the pipeline's own.",
            thresholds=bad_above(1),
            decimals=0,
            width=6,
            height=6,
        ),
    ]


def build(limits: Limits) -> Board:
    alerts = Panel(
        "Active alerts",
        "table",
        [
            Target(
                "max by (alertname, alertstate, severity, category, guardrail, tenant, variant) "
                f"({sel('ALERTS', ALERT_SCOPE)})",
                instant=True,
            )
        ],
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
