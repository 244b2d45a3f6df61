"""Metrics of the span forwarder (its consumer lag is the runtime's ragmon_worker_consumer_lag_messages)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.runtime.collector import export_metrics


class ForwarderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.spans, self.requests, self.request_seconds, self.delay_seconds = export_metrics(
            registry,
            items=(
                "ragmon_forwarder_spans_total",
                "Spans by outcome: forwarded (acknowledged), rejected (the collector refused them for good)",
            ),
            requests=(
                "ragmon_forwarder_requests_total",
                "OTLP export requests by outcome (ok, unavailable, rejected, too_large)",
            ),
            request_seconds=(
                "ragmon_forwarder_request_duration_seconds",
                "Duration of acknowledged OTLP export requests",
            ),
            delay_seconds=(
                "ragmon_forwarder_ingest_to_ack_duration_seconds",
                "From the API accepting spans to the collector acknowledging them",
            ),
        )
