"""Metrics of the evaluation exporter (its consumer lag is the runtime's ragmon_worker_consumer_lag_messages)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

# One OTLP export to a collector: milliseconds, up to its timeout.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# From the score (or the label's arrival) to the collector acknowledging its record.
DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)


class EvaluationsMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.evaluations = Counter(
            "ragmon_evaluations_built_total",
            "gen_ai.evaluation.result records built, by evaluation kind (workers/evaluations/records.py KINDS)",
            ["kind"],
            registry=r,
        )
        self.skipped = Counter(
            "ragmon_evaluations_skipped_total",
            "Events on the read topics that are no evaluation: implicit_signal (scores topic), "
            "gold_only (a label with gold ids only), errored_trace (a failed request: no answer to check)",
            ["reason"],
            registry=r,
        )
        self.records = Counter(
            "ragmon_evaluations_records_total",
            "Log records by outcome: sent (acknowledged), rejected (the collector refused them for good)",
            ["outcome"],
            registry=r,
        )
        self.requests = Counter(
            "ragmon_evaluations_requests_total",
            "OTLP logs export requests by outcome (ok, unavailable, rejected, too_large)",
            ["outcome"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "ragmon_evaluations_request_duration_seconds",
            "Duration of acknowledged OTLP logs export requests",
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.delay_seconds = Histogram(
            "ragmon_evaluations_score_to_ack_duration_seconds",
            "From an evaluation's time (scored_at; a label's or checked trace's arrival) to the collector acknowledging it",
            buckets=DELAY_BUCKETS,
            registry=r,
        )
