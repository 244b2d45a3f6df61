"""Metrics of the review sampler: what it queued, what did not fit, and the queue as PostgreSQL sees it."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.runtime.families import Families

TS = ["tenant", "stratum"]


class ReviewMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        f = Families(registry, TS)
        self.queued = f.counter("ragmon_review_queued_total", "Traces added to the review queue, by stratum")
        self.overflow = f.counter(
            "ragmon_review_overflow_total", "Traces selected for review but over the day's capacity"
        )
        self.parked = f.counter(
            "ragmon_review_triggers_parked_total",
            "Scores or feedback that selected a trace whose content had not arrived (it waits in Redis)",
        )
        self.scored = f.counter(
            "ragmon_review_scored_traces_total",
            "Production faithfulness scores counted for the prediction-powered estimate",
            ["tenant"],
        )
        self.queue_depth = f.gauge(
            "ragmon_review_queue_waiting_traces", "Items still waiting for a (first or second) review"
        )
        self.oldest_waiting = f.gauge(
            "ragmon_review_oldest_waiting_duration_seconds", "Age of the oldest item waiting for review"
        )
        self.reviewed_last_day = f.gauge(
            "ragmon_review_labelled_last_day_traces",
            "Labels saved by reviewers in the last 24 hours",
            ["tenant"],
        )
        # weighting: "reviewed" (the reviewed mix, each item once) or "population" (each item by 1/π)
        self.judge_kappa = f.gauge(
            "ragmon_review_judge_kappa",
            "Cohen's kappa of the judge against reviewers at its configured threshold, held-out half "
            "(latest calibration)",
            ["tenant", "judge", "weighting"],
        )
        self.judge_balanced_accuracy = f.gauge(
            "ragmon_review_judge_balanced_accuracy_ratio",
            "Balanced accuracy of the judge at its configured threshold, held-out half (latest calibration)",
            ["tenant", "judge", "weighting"],
        )
        self.faithful_rate = f.gauge(
            "ragmon_review_faithful_ratio",
            "Production faithful rate (latest calibration): estimate = prediction-powered, population = "
            "reviewed labels re-weighted by 1/π, judge = the judge alone",
            ["tenant", "estimate"],
        )
        self.reviewer_kappa = f.gauge(
            "ragmon_review_reviewer_kappa",
            "Cohen's kappa between two reviewers of the same items",
            ["tenant"],
        )
        self.store_up = f.gauge(
            "ragmon_review_store_up", "1 when the last read of the review store succeeded", ()
        )
