"""The span forwarder's protocol edges against a real HTTP collector on 127.0.0.1.

The collector here is a small OTLP/HTTP server (real sockets, real gzip,
real protobuf parsing) whose answers the test scripts: it exercises the
answers a Phoenix rarely gives on demand (413, 400, partial success, 503).
The happy path against Phoenix itself is in test_exporter.py and
test_phoenix_end_to_end.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from service.local.embedded import free_port
from tests.support.otlp_collector import OtlpCollector
from tests.workers.phoenix.phoenix_data import rag_trace, spans_event
from workers.forwarder.metrics import ForwarderMetrics
from workers.forwarder.processor import PROJECT_ATTRIBUTE, CollectorUnavailable, SpanForwarder
from workers.forwarder.settings import ForwarderSettings
from workers.runtime import collector as delivery


class Collector(OtlpCollector[ExportTraceServiceRequest]):
    def __init__(self) -> None:
        super().__init__("/v1/traces", ExportTraceServiceRequest.FromString)

    def spans_received(self) -> int:
        return sum(
            len(ss.spans) for _, req in self.requests for rs in req.resource_spans for ss in rs.scope_spans
        )


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


def forwarder(collector: Collector, **settings: object) -> tuple[SpanForwarder, CollectorRegistry]:
    registry = CollectorRegistry()
    config = ForwarderSettings(
        endpoint=collector.endpoint, headers=SecretStr("Authorization=Bearer%20k"), **settings
    )  # type: ignore[arg-type]
    return SpanForwarder(config, ForwarderMetrics(registry), "t.spans"), registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_batches_respect_the_span_limit_and_carry_the_headers(collector: Collector) -> None:
    fwd, registry = forwarder(collector, max_spans_per_request=6)
    fwd.process([spans_event(rag_trace(["d"]), offset=i) for i in range(5)])  # 3 spans each
    assert [
        sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
        for _, req in collector.requests
    ] == [6, 6, 3]
    headers, _ = collector.requests[0]
    assert headers["Authorization"] == "Bearer k" and headers["Content-Encoding"] == "gzip"
    assert value(registry, "ragmon_forwarder_spans_total", outcome="forwarded") == 15
    assert value(registry, "ragmon_forwarder_requests_total", outcome="ok") == 3


def test_chunks_keep_both_limits_and_an_oversized_item_goes_alone() -> None:
    settings = ForwarderSettings(endpoint="http://127.0.0.1:1/v1/traces", max_bytes_per_request=1024)
    c: delivery.Collector[tuple[int, int]] = delivery.Collector(
        settings,
        None,
        body_of=lambda chunk: b"",
        response=ExportTraceServiceResponse,
        rejected_of=lambda r: 0,
        on_unavailable=lambda: None,
        log=logging.getLogger("test"),
    )
    items = [(2, 100), (2, 100), (1, 900), (5, 10), (1, 2000), (1, 1)]  # (count, bytes)
    assert list(c.chunks(items, 4, lambda item: item)) == [
        [(2, 100), (2, 100)],  # a third item would pass the count
        [(1, 900)],  # the next would pass the bytes
        [(5, 10)],  # over the count alone
        [(1, 2000)],  # over the bytes alone
        [(1, 1)],
    ]
    assert list(c.chunks([], 4, lambda item: item)) == []
    c.close()


def test_too_large_is_split_and_refused_data_is_counted(collector: Collector) -> None:
    fwd, registry = forwarder(collector)
    collector.answers = [(413, b""), (400, b"bad spans")]
    fwd.process([spans_event(rag_trace(["d"]), offset=i) for i in range(2)])
    # 413 on both records -> one request each: the first is refused for good (400), the second accepted.
    assert collector.spans_received() == 3
    assert value(registry, "ragmon_forwarder_requests_total", outcome="too_large") == 1
    assert value(registry, "ragmon_forwarder_spans_total", outcome="rejected") == 3
    assert value(registry, "ragmon_forwarder_spans_total", outcome="forwarded") == 3


def test_partial_success_counts_the_rejected_spans(collector: Collector) -> None:
    fwd, registry = forwarder(collector, gzip=False)
    partial = ExportTraceServiceResponse(
        partial_success=ExportTracePartialSuccess(rejected_spans=1, error_message="span too old")
    )
    collector.answers = [(200, partial.SerializeToString())]
    fwd.process([spans_event(rag_trace(["d"]))])
    assert value(registry, "ragmon_forwarder_spans_total", outcome="forwarded") == 2
    assert value(registry, "ragmon_forwarder_spans_total", outcome="rejected") == 1


@pytest.mark.parametrize("status", [503, 429, 401])
def test_outages_raise_so_the_batch_is_retried(collector: Collector, status: int) -> None:
    fwd, registry = forwarder(collector)
    collector.answers = [(status, b"")]
    with pytest.raises(CollectorUnavailable, match=str(status)):
        fwd.process([spans_event(rag_trace(["d"]))])
    assert value(registry, "ragmon_forwarder_requests_total", outcome="unavailable") == 1
    assert value(registry, "ragmon_forwarder_spans_total", outcome="forwarded") == 0


def test_an_unreachable_collector_is_an_outage() -> None:
    registry = CollectorRegistry()
    nobody = ForwarderSettings(endpoint=f"http://127.0.0.1:{free_port()}/v1/traces", timeout_s=2)
    fwd = SpanForwarder(nobody, ForwarderMetrics(registry), "t.spans")
    with pytest.raises(CollectorUnavailable, match="ConnectError"):
        fwd.process([spans_event(rag_trace(["d"]))])
    assert value(registry, "ragmon_forwarder_requests_total", outcome="unavailable") == 1


def test_tenant_projects_name_each_tenants_phoenix_project(collector: Collector) -> None:
    fwd, _ = forwarder(collector, tenant_projects={"acme": "acme-rag"})
    fwd.process(
        [spans_event(rag_trace(["d"]), tenant="acme"), spans_event(rag_trace(["d"]), tenant="globex")]
    )
    ((_, request),) = collector.requests
    projects = [
        {a.key: a.value.string_value for a in rs.resource.attributes}.get(PROJECT_ATTRIBUTE)
        for rs in request.resource_spans
    ]
    assert projects == ["acme-rag", "globex"]
