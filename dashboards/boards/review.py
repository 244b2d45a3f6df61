"""Human review: the queue by stratum, its backlog age against the alert, labels per day, agreement, calibration."""

from __future__ import annotations

from dashboards.common import Board, Limits
from dashboards.model import Panel, Row, Target, bad_above, bad_below
from dashboards.promql import TENANT, per_second, sel, zero_when_absent
from service.rules.config import seconds

UID = "ragmon-review"
UP_DOWN = (("0", "down", "red"), ("1", "up", "green"))


def _gauge(metric: str, by: str) -> str:
    # Every review-worker replica reads the same PostgreSQL and exports the same figure: max collapses them.
    return f"max by ({by}) ({sel(metric, TENANT)})"


def _queue(limits: Limits) -> list[Panel]:
    review = limits.guardrails.review
    limit = seconds(review.max_blind_backlog_age)
    return [
        Panel(
            "Waiting for review, by stratum",
            "timeseries",
            [
                Target(
                    _gauge("ragmon_review_queue_waiting_traces", "tenant, stratum"), "{{tenant}} {{stratum}}"
                )
            ],
            description="Items still waiting for a first or second review (blind sample, low confidence, "
            "negative feedback, drift-flagged windows).",
            decimals=0,
            minimum=0,
            stacked=True,
            width=12,
        ),
        Panel(
            "Oldest waiting item, by stratum",
            "timeseries",
            [
                Target(
                    _gauge("ragmon_review_oldest_waiting_duration_seconds", "tenant, stratum"),
                    "{{tenant}} {{stratum}}",
                )
            ],
            description=f"RagmonReviewBacklogStale (ticket) fires when the blind sample's oldest item waits longer "
            f"than {review.max_blind_backlog_age} for {review.for_}: the unbiased check of the judges "
            "goes stale.",
            unit="s",
            thresholds=bad_above(limit),
            minimum=0,
            width=12,
        ),
        Panel(
            "Queued per second, by stratum",
            "timeseries",
            [
                Target(
                    per_second("ragmon_review_queued_total", "tenant, stratum", TENANT),
                    "{{tenant}} {{stratum}}",
                )
            ],
            description="Traces added to the queue (each trace once, in the stratum that selected it first).",
            unit="reqps",
            stacked=True,
            width=8,
        ),
        Panel(
            "Over the day's capacity, by stratum",
            "timeseries",
            [
                Target(
                    zero_when_absent(
                        per_second("ragmon_review_overflow_total", "tenant, stratum", TENANT), "stratum"
                    ),
                    "{{tenant}} {{stratum}}",
                )
            ],
            description="Selected but over the stratum's share of the daily capacity: counted, and the "
            "re-weighting scales π by the share admitted.",
            unit="reqps",
            stacked=True,
            width=8,
        ),
        Panel(
            "Labels saved in the last 24 hours",
            "timeseries",
            [Target(_gauge("ragmon_review_labelled_last_day_traces", "tenant"), "{{tenant}}")],
            description="Reviewed per day: when it drops to zero the queue only grows.",
            decimals=0,
            minimum=0,
            width=8,
        ),
    ]


def _agreement() -> list[Panel]:
    return [
        Panel(
            "Judge against reviewers: Cohen's kappa",
            "timeseries",
            [
                Target(
                    _gauge("ragmon_review_judge_kappa", "tenant, judge, weighting"),
                    "{{tenant}} {{judge}} ({{weighting}})",
                )
            ],
            description="At the configured threshold, on the held-out half (latest `ragmon calibrate`). "
            "population = each reviewed item weighted by 1/π; reviewed = the reviewed mix, where "
            "low-confidence and thumbs-down traces are oversampled.",
            minimum=-1,
            maximum=1,
            decimals=2,
            width=8,
        ),
        Panel(
            "Judge against reviewers: balanced accuracy",
            "timeseries",
            [
                Target(
                    _gauge("ragmon_review_judge_balanced_accuracy_ratio", "tenant, judge, weighting"),
                    "{{tenant}} {{judge}} ({{weighting}})",
                )
            ],
            description="(TPR + TNR) / 2 of the judge's verdict against the human label, same halves and weights.",
            unit="percentunit",
            minimum=0,
            maximum=1,
            width=8,
        ),
        Panel(
            "Reviewer against reviewer: Cohen's kappa",
            "timeseries",
            [Target(_gauge("ragmon_review_reviewer_kappa", "tenant"), "{{tenant}}")],
            description="On the items given to a second reviewer: how far the people agree, the ceiling for a "
            "judge.",
            minimum=-1,
            maximum=1,
            decimals=2,
            width=8,
        ),
        Panel(
            "Production faithful rate",
            "timeseries",
            [Target(_gauge("ragmon_review_faithful_ratio", "tenant, estimate"), "{{tenant}} {{estimate}}")],
            description="prediction_powered = the judge on every scored trace corrected by blind-sample labels; "
            "population = all reviewed strata re-weighted by 1/π; judge = the judge alone.",
            unit="percentunit",
            minimum=0,
            maximum=1,
            width=16,
        ),
        Panel(
            "Review store reachable",
            "stat",
            [Target("min(ragmon_review_store_up)", "store")],
            description="The review worker's last read of PostgreSQL (queue gauges) succeeded.",
            thresholds=bad_below(1),
            mappings=UP_DOWN,
            width=8,
        ),
    ]


def build(limits: Limits) -> Board:
    return Board(
        UID,
        "ragmon / Review",
        "Human review: what waits in each stratum and for how long (against the backlog alert), what was "
        "queued, overflowed and labelled, and how far the judges agree with people — re-weighted to "
        "production and on the reviewed mix.",
        [Row("Queue", _queue(limits)), Row("Agreement and calibration", _agreement())],
        tags=("review",),
    )
