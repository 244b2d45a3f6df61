"""Every metric of the ingestion API (one registry per app instance), and the port they are served on.

/metrics is not on the ingestion port: it names every tenant and its traffic, and the ingestion port is
the one every RAG app (and whoever else reaches it) can talk to. It is served on its own port
(RAGMON_API_METRICS_HOST / RAGMON_API_METRICS_PORT, loopback by default) for the scraper alone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ApiMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def counter(name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        def latency(name: str, doc: str, labels: Sequence[str] = ()) -> Histogram:
            return Histogram(name, doc, labels, buckets=_LATENCY_BUCKETS, registry=registry)

        # With several API processes (`ragmon api --workers N`) gauges are combined across
        # them: in-flight events add up, a reachable broker or Redis is the worst process's view.
        def gauge(name: str, doc: str, multiprocess_mode: Literal["livesum", "livemin", "livemax"]) -> Gauge:
            return Gauge(name, doc, registry=registry, multiprocess_mode=multiprocess_mode)

        self.requests = counter(
            "ragmon_api_requests_total",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
        )
        self.request_seconds = latency(
            "ragmon_api_request_duration_seconds",
            "HTTP request latency by route template",
            ["route", "method"],
        )
        self.events_accepted = counter(
            "ragmon_api_events_accepted_total", "Events durably acknowledged by Kafka", ["tenant", "type"]
        )
        self.events_rejected = counter(
            "ragmon_api_events_rejected_total",
            "Events rejected before producing, by reason",
            ["type", "reason"],
        )
        self.produce_seconds = latency(
            "ragmon_api_produce_duration_seconds", "Time from send to broker acknowledgement of a batch"
        )
        self.shed = counter(
            "ragmon_api_shed_total", "Requests answered 503 without producing, by reason", ["reason"]
        )
        self.rate_limited = counter(
            "ragmon_api_rate_limited_total", "Requests answered 429, by tenant", ["tenant"]
        )
        self.cpu_debt = counter(
            "ragmon_api_cpu_debt_tokens_total",
            "Rate-limit tokens charged after a batch for CPU beyond twice "
            "what it paid (text built to be slow), by tenant",
            ["tenant"],
        )
        self.redactions = counter("ragmon_api_redactions_total", "PII spans redacted, by kind", ["kind"])
        self.otlp_spans_accepted = counter(
            "ragmon_api_otlp_spans_accepted_total", "OTLP spans durably acknowledged by Kafka", ["tenant"]
        )
        self.otlp_spans_rejected = counter(
            "ragmon_api_otlp_spans_rejected_total",
            "OTLP spans rejected (partial success), by reason",
            ["reason"],
        )
        self.otlp_log_records_accepted = counter(
            "ragmon_api_otlp_log_records_accepted_total",
            "OTLP log records (POST /v1/logs) durably acknowledged by Kafka",
            ["tenant"],
        )
        self.otlp_log_records_rejected = counter(
            "ragmon_api_otlp_log_records_rejected_total",
            "OTLP log records rejected (partial success), by reason (missing_span_id: not emitted inside a span)",
            ["reason"],
        )
        self.otlp_values_truncated = counter(
            "ragmon_api_otlp_attribute_values_truncated_total",
            "OTLP string attribute values cut to otlp_max_attribute_chars",
        )
        self.inflight_events = gauge(
            "ragmon_api_inflight_events", "Events waiting for broker acknowledgement", "livesum"
        )
        self.broker_up = gauge("ragmon_api_broker_up", "1 when the producer can reach the broker", "livemin")
        self.redis_up = gauge("ragmon_api_redis_up", "1 when Redis answered the last check", "livemin")
        self.labels_saved = counter(
            "ragmon_api_review_labels_total", "Labels saved on the review page", ["tenant"]
        )
        self.label_outbox_relayed = counter(
            "ragmon_api_label_outbox_relayed_total", "Label events acknowledged by Kafka from the outbox"
        )
        self.label_outbox_pending = gauge(
            "ragmon_api_label_outbox_pending_events",
            "Saved labels whose event Kafka has not acknowledged yet",
            "livemax",
        )


@dataclass
class MetricsServer:
    """The scrape endpoint's HTTP server (a thread of the process that owns it)."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def multiprocess_registry(path: str) -> CollectorRegistry:
    """Every API process' metrics, read from their files in `path` (PROMETHEUS_MULTIPROC_DIR) at each scrape."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=path)
    return registry


def serve_metrics(host: str, port: int, registry: CollectorRegistry) -> MetricsServer:
    """Serve `registry` on host:port (port 0: any free port; MetricsServer.port says which)."""
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise RuntimeError(
            f"cannot serve /metrics on {host}:{port} (RAGMON_API_METRICS_HOST/PORT): {exc}"
        ) from exc
    return MetricsServer(server, thread)


def in_multiprocess_child() -> bool:
    """A child of `ragmon api --workers N`: its parent serves the metrics of all of them."""
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
