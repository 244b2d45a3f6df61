"""Metrics of the Phoenix exporter."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.runtime.families import Families

# One Phoenix REST call: a few ms on a quiet server, seconds when its database is busy.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# From the score to its annotation in Phoenix: immediate, or minutes while a trace waits to reach Phoenix.
DELAY_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)


class PhoenixMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        f = Families(registry)
        self.annotations = f.counter(
            "ragmon_phoenix_annotations_total",
            "Annotations by kind and outcome: sent (Phoenix acknowledged), rejected (Phoenix refused the data), "
            "trace_not_found (the trace never reached Phoenix within the wait), untraceable (the trace id "
            "names no OTLP trace), document_not_found (no retriever span lists the document), "
            "waiting_full (dropped: too many scores waiting)",
            ["kind", "outcome"],
        )
        self.failed_attempts = f.counter(
            "ragmon_phoenix_annotation_failures_total",
            "Annotations in a write attempt that failed on a Phoenix outage (the attempt is retried)",
            ["kind"],
        )
        self.requests = f.counter(
            "ragmon_phoenix_requests_total",
            "Phoenix REST calls by endpoint and outcome (ok, unavailable, rejected)",
            ["endpoint", "outcome"],
        )
        self.request_seconds = f.histogram(
            "ragmon_phoenix_request_duration_seconds",
            "Duration of successful Phoenix REST calls",
            ["endpoint"],
            buckets=REQUEST_BUCKETS,
        )
        self.delay_seconds = f.histogram(
            "ragmon_phoenix_score_to_annotation_duration_seconds",
            "From a score event's scoring to Phoenix acknowledging its annotation",
            ["kind"],
            buckets=DELAY_BUCKETS,
        )
        self.waiting = f.gauge(
            "ragmon_phoenix_waiting_events", "Score events waiting in Redis for their trace to reach Phoenix"
        )
