"""The span forwarder: raw spans from the spans topic to Phoenix (or any OTLP/HTTP collector).

The app exports once, to ragmon; this worker sends the same (redacted)
spans on. A batch of records becomes as few `ExportTraceServiceRequest`s as
the size limits allow: a spans record's value is a serialised `TracesData`,
whose only field (`resource_spans`, field 1) is also the request's only
field, so concatenating the values is a valid request holding all of them.

The runtime commits offsets only after every request was acknowledged
(workers/runtime/collector.py): an unreachable collector, a timeout,
401/403/404/408, 429 or 5xx raises and the batch is retried with backoff
(never dead-lettered). A request the collector refuses for good (another 4xx)
is counted as rejected spans; one that is too large (413) is split in halves
until each part is accepted or is a single record. Metrics are counted as
each answer comes.
"""

from __future__ import annotations

import logging
import time

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from service.contracts.spans import SpanRecord
from workers.forwarder.metrics import ForwarderMetrics
from workers.forwarder.settings import ForwarderSettings
from workers.runtime.collector import Collector, CollectorUnavailable
from workers.runtime.contract import Processor
from workers.runtime.records import Subscription, decode_spans_record
from workers.runtime.types import Event, Rejection

log = logging.getLogger("ragmon.worker.forwarder")
PROJECT_ATTRIBUTE = "openinference.project.name"
__all__ = ["PROJECT_ATTRIBUTE", "CollectorUnavailable", "SpanForwarder"]


class SpanForwarder(Processor):
    name = "forwarder"
    event_types: tuple[str, ...] = ()

    def __init__(
        self,
        settings: ForwarderSettings,
        metrics: ForwarderMetrics,
        spans_topic: str,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.subscriptions = (Subscription(spans_topic, "otlp_spans", decode_spans_record),)
        self._settings = settings
        self._metrics = metrics
        self._collector: Collector[Event] = Collector(
            settings,
            http_client,
            body_of=lambda chunk: b"".join(self.value_of(e) for e in chunk),
            response=ExportTraceServiceResponse,
            rejected_of=lambda r: r.partial_success.rejected_spans,
            on_unavailable=metrics.requests.labels("unavailable").inc,
            log=log,
        )

    def close(self) -> None:
        self._collector.close()

    def process(self, events: list[Event]) -> list[Rejection]:
        for chunk in self._collector.chunks(events, self._settings.max_spans_per_request, _weight):
            self._collector.deliver(chunk, self)
        return []

    def value_of(self, event: Event) -> bytes:
        """The record's TracesData bytes, every resource in the tenant's own Phoenix project.

        A project the client named is replaced: spans of one tenant never land in another's project
        (workers/phoenix/projects.py).
        """
        record: SpanRecord = event.body
        project = self._settings.project_for(record.tenant)
        data = record.data
        for rs in data.resource_spans:
            attributes = rs.resource.attributes
            kept = [a for a in attributes if a.key != PROJECT_ATTRIBUTE]
            if len(kept) != len(attributes):
                del attributes[:]
                attributes.extend(kept)
            attributes.append(KeyValue(key=PROJECT_ATTRIBUTE, value=AnyValue(string_value=project)))
        return data.SerializeToString()

    def refused(self, chunk: list[Event], code: int, text: str) -> None:
        count = _spans(chunk)
        self._metrics.requests.labels("rejected").inc()
        self._metrics.spans.labels("rejected").inc(count)
        log.error("the collector refused %d spans with %d: %s", count, code, text)

    def too_large(self) -> None:
        self._metrics.requests.labels("too_large").inc()

    def accepted(self, chunk: list[Event], rejected: int, seconds: float) -> None:
        count = _spans(chunk)
        if rejected:
            log.warning("the collector rejected %d of %d spans", rejected, count)
        self._metrics.requests.labels("ok").inc()
        self._metrics.request_seconds.observe(seconds)
        self._metrics.spans.labels("forwarded").inc(count - rejected)
        self._metrics.spans.labels("rejected").inc(rejected)
        now = time.time()
        for e in chunk:
            self._metrics.delay_seconds.observe(max(0.0, now - e.stored.received_at.timestamp()))


def _spans(chunk: list[Event]) -> int:
    return sum(e.body.span_count for e in chunk)


def _weight(event: Event) -> tuple[int, int]:
    """What a request's limits count of a record: its spans and its bytes."""
    return event.body.span_count, len(event.raw or b"")
