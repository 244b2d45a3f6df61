"""Metrics of the evaluation exporter (its consumer lag is the runtime's ragmon_worker_consumer_lag_messages)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.runtime.collector import export_metrics
from workers.runtime.families import Families


class EvaluationsMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        f = Families(registry)
        self.evaluations = f.counter(
            "ragmon_evaluations_built_total",
            "gen_ai.evaluation.result records built, by evaluation kind (workers/evaluations/records.py KINDS)",
            ["kind"],
        )
        self.skipped = f.counter(
            "ragmon_evaluations_skipped_total",
            "Events on the read topics that are no evaluation: implicit_signal (scores topic), "
            "gold_only (a label with gold ids only), errored_trace (a failed request: no answer to check)",
            ["reason"],
        )
        self.records, self.requests, self.request_seconds, self.delay_seconds = export_metrics(
            registry,
            items=(
                "ragmon_evaluations_records_total",
                "Log records by outcome: sent (acknowledged), rejected (the collector refused them for good)",
            ),
            requests=(
                "ragmon_evaluations_requests_total",
                "OTLP logs export requests by outcome (ok, unavailable, rejected, too_large)",
            ),
            request_seconds=(
                "ragmon_evaluations_request_duration_seconds",
                "Duration of acknowledged OTLP logs export requests",
            ),
            delay_seconds=(
                "ragmon_evaluations_score_to_ack_duration_seconds",
                "From an evaluation's time (scored_at; a label's or checked trace's arrival) to the collector acknowledging it",
            ),
        )
