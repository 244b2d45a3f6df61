"""Every metric of the ingestion API (one registry per app instance)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ApiMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "ragmon_api_requests_total", "HTTP requests by route template, method and status",
            ["route", "method", "status"], registry=registry,
        )
        self.request_seconds = Histogram(
            "ragmon_api_request_duration_seconds", "HTTP request latency by route template",
            ["route", "method"], buckets=_LATENCY_BUCKETS, registry=registry,
        )
        self.events_accepted = Counter(
            "ragmon_api_events_accepted_total", "Events durably acknowledged by Kafka",
            ["tenant", "type"], registry=registry,
        )
        self.events_rejected = Counter(
            "ragmon_api_events_rejected_total", "Events rejected before producing, by reason",
            ["type", "reason"], registry=registry,
        )
        self.produce_seconds = Histogram(
            "ragmon_api_produce_duration_seconds", "Time from send to broker acknowledgement of a batch",
            buckets=_LATENCY_BUCKETS, registry=registry,
        )
        self.shed = Counter(
            "ragmon_api_shed_total", "Requests answered 503 without producing, by reason",
            ["reason"], registry=registry,
        )
        self.rate_limited = Counter(
            "ragmon_api_rate_limited_total", "Requests answered 429, by tenant",
            ["tenant"], registry=registry,
        )
        self.redactions = Counter(
            "ragmon_api_redactions_total", "PII spans redacted, by kind", ["kind"], registry=registry,
        )
        self.otlp_spans_accepted = Counter(
            "ragmon_api_otlp_spans_accepted_total", "OTLP spans durably acknowledged by Kafka",
            ["tenant"], registry=registry,
        )
        self.otlp_spans_rejected = Counter(
            "ragmon_api_otlp_spans_rejected_total", "OTLP spans rejected (partial success), by reason",
            ["reason"], registry=registry,
        )
        self.otlp_values_truncated = Counter(
            "ragmon_api_otlp_attribute_values_truncated_total",
            "OTLP string attribute values cut to otlp_max_attribute_chars", registry=registry,
        )
        # With several API processes (`ragmon api --workers N`) gauges are combined across
        # them: in-flight events add up, a reachable broker or Redis is the worst process's view.
        self.inflight_events = Gauge(
            "ragmon_api_inflight_events", "Events waiting for broker acknowledgement", registry=registry,
            multiprocess_mode="livesum",
        )
        self.broker_up = Gauge("ragmon_api_broker_up", "1 when the producer can reach the broker", registry=registry,
                               multiprocess_mode="livemin")
        self.redis_up = Gauge("ragmon_api_redis_up", "1 when Redis answered the last check", registry=registry,
                              multiprocess_mode="livemin")
        self.labels_saved = Counter(
            "ragmon_api_review_labels_total", "Labels saved on the review page", ["tenant"], registry=registry,
        )
        self.label_outbox_relayed = Counter(
            "ragmon_api_label_outbox_relayed_total", "Label events acknowledged by Kafka from the outbox",
            registry=registry,
        )
        self.label_outbox_pending = Gauge(
            "ragmon_api_label_outbox_pending_events", "Saved labels whose event Kafka has not acknowledged yet",
            registry=registry, multiprocess_mode="livemax",
        )
