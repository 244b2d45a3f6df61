"""Metrics of the span forwarder (its consumer lag is the runtime's ragmon_worker_consumer_lag_messages)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

# One OTLP export to a collector: milliseconds, up to its timeout.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# From the API accepting spans to the collector acknowledging them.
DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)


class ForwarderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.spans = Counter(
            "ragmon_forwarder_spans_total",
            "Spans by outcome: forwarded (acknowledged), rejected (the collector refused them for good)",
            ["outcome"],
            registry=r,
        )
        self.requests = Counter(
            "ragmon_forwarder_requests_total",
            "OTLP export requests by outcome (ok, unavailable, rejected, too_large)",
            ["outcome"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "ragmon_forwarder_request_duration_seconds",
            "Duration of acknowledged OTLP export requests",
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.delay_seconds = Histogram(
            "ragmon_forwarder_ingest_to_ack_duration_seconds",
            "From the API accepting spans to the collector acknowledging them",
            buckets=DELAY_BUCKETS,
            registry=r,
        )
