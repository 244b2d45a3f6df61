"""Human review: the queue by stratum, its backlog age against the alert, labels per day, agreement, calibration."""

from __future__ import annotations

from dashboards.common import Board, Limits
from dashboards.model import Panel, Row, Target, bad_above
from dashboards.panels import (
    count_panel,
    counter,
    per_second_panel,
    ratio_panel,
    seconds_panel,
    timeseries,
    up_stat,
)
from dashboards.promql import TENANT, across_replicas
from service.rules.config import seconds

UID = "ragmon-review"


def _gauge(metric: str, by: str) -> str:
    # Every review-worker replica reads the same PostgreSQL and exports the same figure: max collapses them.
    return across_replicas(metric, by, TENANT)


def _kappa(title: str, target: Target, description: str) -> Panel:
    """Cohen's kappa: agreement beyond chance, from -1 to 1."""
    return timeseries(title, target, description=description, minimum=-1, maximum=1, decimals=2)


def _queue(limits: Limits) -> list[Panel]:
    review = limits.guardrails.review
    limit = seconds(review.max_blind_backlog_age)
    by = "tenant, stratum"
    legend = "{{tenant}} {{stratum}}"
    return [
        count_panel(
            "Waiting for review, by stratum",
            Target(_gauge("ragmon_review_queue_waiting_traces", by), legend),
            description="Items still waiting for a first or second review (blind sample, low confidence, "
            "negative feedback, drift-flagged windows).",
            decimals=0,
            stacked=True,
            width=12,
        ),
        seconds_panel(
            "Oldest waiting item, by stratum",
            Target(_gauge("ragmon_review_oldest_waiting_duration_seconds", by), legend),
            description=f"RagmonReviewBacklogStale (ticket) fires when the blind sample's oldest item waits longer "
            f"than {review.max_blind_backlog_age} for {review.for_}: the unbiased check of the judges "
            "goes stale.",
            thresholds=bad_above(limit),
            minimum=0,
            width=12,
        ),
        per_second_panel(
            "Queued per second, by stratum",
            counter("ragmon_review_queued_total", by, legend, TENANT),
            description="Traces added to the queue (each trace once, in the stratum that selected it first).",
        ),
        per_second_panel(
            "Over the day's capacity, by stratum",
            counter("ragmon_review_overflow_total", by, legend, TENANT, zero="stratum"),
            description="Selected but over the stratum's share of the daily capacity: counted, and the "
            "re-weighting scales π by the share admitted.",
        ),
        count_panel(
            "Labels saved in the last 24 hours",
            Target(_gauge("ragmon_review_labelled_last_day_traces", "tenant"), "{{tenant}}"),
            description="Reviewed per day: when it drops to zero the queue only grows.",
            decimals=0,
        ),
    ]


def _agreement() -> list[Panel]:
    judges = "tenant, judge, weighting"
    per_judge = "{{tenant}} {{judge}} ({{weighting}})"
    return [
        _kappa(
            "Judge against reviewers: Cohen's kappa",
            Target(_gauge("ragmon_review_judge_kappa", judges), per_judge),
            "At the configured threshold, on the held-out half (latest `ragmon calibrate`). "
            "population = each reviewed item weighted by 1/π; reviewed = the reviewed mix, where "
            "low-confidence and thumbs-down traces are oversampled.",
        ),
        ratio_panel(
            "Judge against reviewers: balanced accuracy",
            Target(_gauge("ragmon_review_judge_balanced_accuracy_ratio", judges), per_judge),
            description="(TPR + TNR) / 2 of the judge's verdict against the human label, same halves and weights.",
            unit="percentunit",
        ),
        _kappa(
            "Reviewer against reviewer: Cohen's kappa",
            Target(_gauge("ragmon_review_reviewer_kappa", "tenant"), "{{tenant}}"),
            "On the items given to a second reviewer: how far the people agree, the ceiling for a judge.",
        ),
        ratio_panel(
            "Production faithful rate",
            Target(_gauge("ragmon_review_faithful_ratio", "tenant, estimate"), "{{tenant}} {{estimate}}"),
            description="prediction_powered = the judge on every scored trace corrected by blind-sample labels; "
            "population = all reviewed strata re-weighted by 1/π; judge = the judge alone.",
            unit="percentunit",
            width=16,
        ),
        up_stat(
            "Review store reachable",
            Target("min(ragmon_review_store_up)", "store"),
            description="The review worker's last read of PostgreSQL (queue gauges) succeeded.",
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
