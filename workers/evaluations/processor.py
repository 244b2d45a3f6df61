"""The evaluation exporter: ragmon's evaluations as `gen_ai.evaluation.result` log records over OTLP/HTTP.

It reads the scores topic (faithfulness scores, exclusion results; implicit
signals share the topic and are skipped: they are not evaluations), the
labels topic (a label's `faithful` and `answerable` judgements), the traces
topic unless RAGMON_EVALUATIONS_CHECKS=false (it runs the deterministic answer
checks of workers/checks on each trace, with the config file's `checks`
section, as the metrics worker does: pure and cheap, so no worker has to
publish their outcomes; an errored trace has no answer to check), and the
spans topic for the root span id of each OTLP trace (workers/evaluations/roots.py,
unless RAGMON_EVALUATIONS_ROOT_SPANS=false), turns each
evaluation into one OpenTelemetry log record (workers/evaluations/records.py)
and sends them, grouped per tenant in one resource each, as
`ExportLogsServiceRequest`s (protobuf) to RAGMON_EVALUATIONS_ENDPOINT.

Delivery is the span forwarder's (workers/runtime/collector.py): the
runtime commits offsets only after every request was acknowledged. An
unreachable collector, a timeout, 401/403/404/408, 429 or 5xx raises and the
batch is retried with backoff, the worker not ready meanwhile (never
dead-lettered); a request refused for good (another 4xx) is counted as
rejected records and not sent again; one that is too large (413) is split in
halves until each part is accepted or is a single record. A retried batch
may resend records that an earlier request of it delivered: at least once,
with `ragmon.evaluation.id` for the backend to deduplicate on. Metrics are
recorded once the whole batch succeeded, so a retry never counts twice.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from service.contracts import LabelBody
from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent, ImplicitSignalEvent
from service.contracts.spans import SpanRecord
from workers.checks.answer import check_answer
from workers.checks.config import ChecksConfig
from workers.evaluations.metrics import EvaluationsMetrics
from workers.evaluations.records import (
    Evaluation,
    check_records,
    exclusion_records,
    faithfulness_records,
    label_records,
)
from workers.evaluations.roots import RootSpans, root_key, roots_of
from workers.evaluations.settings import EvaluationsSettings
from workers.evaluations.views import VIEWS, CheckedTrace
from workers.runtime.collector import Collector, CollectorUnavailable
from workers.runtime.contract import Processor
from workers.runtime.records import Subscription, decode_spans_record
from workers.runtime.types import Event, Rejection

log = logging.getLogger("ragmon.worker.evaluations")
SCOPE = "ragmon.evaluations"
__all__ = ["CollectorUnavailable", "EvaluationExporter"]


@dataclass
class Done:
    """What a batch did, recorded in metrics only after every request of it succeeded."""

    built: list[Evaluation] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    sent: int = 0
    rejected: int = 0
    requests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    request_seconds: list[float] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)
    clock: Callable[[], float] = time.time

    def too_large(self) -> None:
        self.requests["too_large"] += 1

    def refused(self, chunk: list[Evaluation], code: int, text: str) -> None:
        self.requests["rejected"] += 1
        self.rejected += len(chunk)
        log.error("the collector refused %d evaluation records with %d: %s", len(chunk), code, text)

    def accepted(self, chunk: list[Evaluation], rejected: int, seconds: float) -> None:
        if rejected:
            log.warning("the collector rejected %d of %d evaluation records", rejected, len(chunk))
        self.requests["ok"] += 1
        self.request_seconds.append(seconds)
        self.sent += len(chunk) - rejected
        self.rejected += rejected
        acked = self.clock()
        self.delays += [max(0.0, acked - e.at) for e in chunk]


class EvaluationExporter(Processor):
    name = "evaluations"
    event_types: tuple[str, ...] = ("score", "label", "trace")  # traces for the checks, unless they are off
    views = VIEWS

    def __init__(
        self,
        settings: EvaluationsSettings,
        metrics: EvaluationsMetrics,
        roots: RootSpans | None = None,
        spans_topic: str | None = None,
        http_client: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        checks: ChecksConfig | None = None,
    ) -> None:
        """`checks`: the answer checks' config; None (or a disabled section) publishes no check results."""
        self._checks = checks if checks is not None and checks.enabled else None
        if self._checks is None:
            self.event_types = ("score", "label")
        # With a root-span store and the spans topic, records name the root span (workers/evaluations/roots.py).
        self._roots = roots
        if roots is not None and spans_topic is not None:
            self.subscriptions = (Subscription(spans_topic, "otlp_spans", decode_spans_record),)
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._collector: Collector[Evaluation] = Collector(
            settings,
            http_client,
            body_of=lambda chunk: self.request(chunk).SerializeToString(),
            response=ExportLogsServiceResponse,
            rejected_of=lambda r: r.partial_success.rejected_log_records,
            on_unavailable=metrics.requests.labels("unavailable").inc,
            log=log,
        )

    def close(self) -> None:
        self._collector.close()

    def process(self, events: list[Event]) -> list[Rejection]:
        done = Done(clock=self._clock)
        if self._roots is not None:
            roots: dict[str, str] = {}
            for event in events:
                if isinstance(event.body, SpanRecord):
                    roots |= roots_of(event.body)
            self._roots.remember(roots)  # before the lookup: a score in the same batch finds its root
        done.built = self.evaluations(events, done)
        if self._roots is not None and done.built:
            found = self._roots.find(root_key(e.tenant, e.trace_id) for e in done.built if e.record.trace_id)
            for e in done.built:
                if e.record.trace_id:
                    e.record.span_id = found.get(root_key(e.tenant, e.trace_id), b"")
        max_records = self._settings.max_records_per_request
        for chunk in self._collector.chunks(done.built, max_records, lambda e: (1, e.record.ByteSize())):
            self._collector.deliver(chunk, done)
        self._record(done)
        return []

    def evaluations(self, events: list[Event], done: Done | None = None) -> list[Evaluation]:
        """Every evaluation the batch holds, in order; what is none is counted in `done.skipped`."""
        done = done or Done()
        now = self._clock()
        out: list[Evaluation] = []
        for event in events:
            body = event.body
            if isinstance(body, ImplicitSignalEvent):
                done.skipped["implicit_signal"] += 1
            elif isinstance(body, FaithfulnessScoreEvent):
                out += faithfulness_records(body, now, self._settings.include_text)
            elif isinstance(body, ExclusionResultEvent):
                out += exclusion_records(body, now)
            elif isinstance(body, CheckedTrace):
                if self._checks is None:
                    continue
                if body.error is not None:
                    done.skipped["errored_trace"] += 1
                    continue
                result = check_answer(
                    self._checks, event.tenant, body.answer, body.retrieval.documents, body.response_format
                )
                context = {"ragmon.variant": body.variant, "ragmon.release": body.release}
                context |= {"ragmon.intent": body.intent, "ragmon.request_id": body.request_id}
                out += check_records(
                    event.stored.id,
                    event.tenant,
                    body.trace_id,
                    event.stored.received_at,
                    context,
                    result,
                    now,
                )
            elif isinstance(body, LabelBody):
                found = list(
                    label_records(event.stored.id, event.tenant, event.stored.received_at, body, now)
                )
                if not found:
                    done.skipped["gold_only"] += 1
                out += found
        return out

    def request(self, chunk: list[Evaluation]) -> ExportLogsServiceRequest:
        """One ExportLogsServiceRequest: a resource per tenant (service.name, ragmon.tenant), one scope."""
        by_tenant: dict[str, list[Evaluation]] = defaultdict(list)
        for e in chunk:
            by_tenant[e.tenant].append(e)
        req = ExportLogsServiceRequest()
        for tenant, group in by_tenant.items():
            resource = Resource(
                attributes=[
                    KeyValue(key="service.name", value=AnyValue(string_value=self._settings.service_name)),
                    KeyValue(key="ragmon.tenant", value=AnyValue(string_value=tenant)),
                ]
            )
            scope = ScopeLogs(scope=InstrumentationScope(name=SCOPE), log_records=[e.record for e in group])
            req.resource_logs.append(ResourceLogs(resource=resource, scope_logs=[scope]))
        return req

    def _record(self, done: Done) -> None:
        m = self._metrics
        for e in done.built:
            m.evaluations.labels(e.kind).inc()
        for reason, n in done.skipped.items():
            m.skipped.labels(reason).inc(n)
        for outcome, n in done.requests.items():
            m.requests.labels(outcome).inc(n)
        for s in done.request_seconds:
            m.request_seconds.observe(s)
        for d in done.delays:
            m.delay_seconds.observe(d)
        m.records.labels("sent").inc(done.sent)
        m.records.labels("rejected").inc(done.rejected)
