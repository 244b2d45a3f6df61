"""The assembler's two steps, free of the consumer loop (the shared runtime's, workers/assembler/processor.py).

store_spans(records): store the spans of decoded spans-topic records in Redis (idempotent), produce
feedback events for annotation spans, and wait for every acknowledgement: only then may the
runtime commit the offsets. The records were decoded by the runtime's spans decoder
(workers/runtime/records.py), which dead-letters what is not a spans record.

store_logs(records): store the log records of decoded logs-topic records (POST /v1/logs) beside their
trace's spans (idempotent, capped apart); they are joined to their spans when the trace is assembled.

tick(now): claim the traces that are due, assemble each into one trace event (id
derived from tenant and trace id, so a replay or a re-assembly yields the same id),
produce them, and only after the acknowledgement close their state in Redis.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, TracesData
from prometheus_client import Counter

from service.contracts import StoredEvent, record_key
from service.contracts.logs import LogsRecord, encode_logs_record
from service.contracts.spans import SpanRecord, encode_span_record, trace_event_id
from service.contracts.stored import record_headers, stored_document
from service.contracts.topics import Topics
from workers.assembler.config import AssemblerConfig
from workers.assembler.feedback import FeedbackEvent, feedback_events
from workers.assembler.genai import KIND_OF_OPERATION, OPERATION_KEY
from workers.assembler.logs import join, log_entries
from workers.assembler.mapping import TraceSpans, assemble
from workers.assembler.metrics import AssemblerMetrics
from workers.assembler.store import MAPPED, OTHER, ROOT, AddResult, OpenTrace, SpanEntry, TraceStore
from workers.assembler.usage import STAGE_OF_KIND
from workers.assembler.view import SpanView, attribute_map
from workers.runtime.dlq import dlq_headers, emit_dead_letter
from workers.runtime.emitter import RecordTooLarge
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.poison import is_poison, poison_detail, poison_reason
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import Emitter, SourceRecord

log = logging.getLogger("ragmon.worker.assembler")
WORKER = "assembler"
# The span kinds of the OpenInference specification, which are the neutral kinds GenAI operations map onto
# (workers/assembler/genai.py), as metric label values, plus "none" for spans of no convention.
OPENINFERENCE_KINDS = frozenset(
    {
        "CHAIN",
        "LLM",
        "RETRIEVER",
        "RERANKER",
        "EMBEDDING",
        "TOOL",
        "AGENT",
        "GUARDRAIL",
        "EVALUATOR",
        "PROMPT",
        "UNKNOWN",
        "none",
    }
)
MAPPED_KINDS = frozenset(STAGE_OF_KIND) - {"TOOL", "GUARDRAIL"}  # the spans the mapping reads beyond the root


_EMPTY: dict[str, Any] = {}
_LOGS_ONLY = "logs_only"  # a trace of log records whose spans never came: their drop, not a trace's
# (type, tenant) pairs whose envelope the contract model accepted. The other fields of an envelope cannot
# make it invalid (the id is a UUID this module makes, the two timestamps are datetimes written by isoformat),
# so the model is asked once per pair instead of once per event. Bounded: cleared when it grows past this.
_VALID_ENVELOPES: set[tuple[str, str]] = set()
_MAX_VALID_ENVELOPES = 10_000


def stored_event(event_id: str, etype: str, tenant: str, at: datetime, body: dict[str, Any]) -> bytes:
    """A record value exactly as the API writes one for /v1/events, validated by the same contract model."""
    doc = stored_document(event_id, etype, tenant, at.isoformat(), datetime.now(UTC).isoformat(), _EMPTY)
    if (etype, tenant) not in _VALID_ENVELOPES:
        StoredEvent.model_validate(
            doc
        )  # the envelope; the body was validated by its own model (TraceBody, ...)
        if len(_VALID_ENVELOPES) >= _MAX_VALID_ENVELOPES:
            _VALID_ENVELOPES.clear()
        _VALID_ENVELOPES.add((etype, tenant))
    doc["body"] = body
    return orjson.dumps(doc)


def event_headers(event_id: str, etype: str, tenant: str) -> list[tuple[str, bytes]]:
    return record_headers(event_id, etype, tenant)


_KIND_KEY = "openinference.span.kind"
_KIND_KEY_BYTES = _KIND_KEY.encode()
_ANNOTATIONS = "annotations."
_ANNOTATIONS_BYTES = _ANNOTATIONS.encode()
_OPERATION_KEY_BYTES = OPERATION_KEY.encode()
# The conventions whose unknown attributes are counted (metric label values), plus "other".
CONVENTIONS = frozenset({"gen_ai"})


def _genai_kind(span: Span, payload: bytes) -> str | None:
    """The neutral kind of a GenAI span (gen_ai.operation.name), found the same way as the OpenInference one."""
    if _OPERATION_KEY_BYTES not in payload:
        return None
    operation = None
    for item in span.attributes:
        if item.key == OPERATION_KEY:
            operation = item.value.string_value.strip().lower()
    return KIND_OF_OPERATION.get(operation, "UNKNOWN") if operation else None


def _kind_and_annotations(span: Span, payload: bytes) -> tuple[str | None, bool]:
    """The OpenInference kind and whether the span carries annotations, without decoding every attribute.

    `payload` is the span serialised: a key absent from its bytes is on no attribute, so the attributes are
    walked only as far as needed (to the kind when its key occurs once; every one when annotations may be there).
    """
    kind = None
    annotated = False
    may_annotate = _ANNOTATIONS_BYTES in payload
    occurrences = payload.count(_KIND_KEY_BYTES)
    if not occurrences and not may_annotate:
        return None, False
    for item in span.attributes:
        key = item.key
        if key == _KIND_KEY:
            kind = item.value.string_value.upper()
            if occurrences == 1 and not may_annotate:
                break  # the only attribute with this key (a later duplicate would have won)
        elif may_annotate and key.startswith(_ANNOTATIONS):
            annotated = True
    return kind, annotated


def _count_added(counter: Counter, results: list[AddResult]) -> None:
    """What the store did with a batch's spans (or log records), by outcome, one update per outcome."""
    for outcome, n in (
        ("stored", sum(r.stored for r in results)),
        ("duplicate", sum(r.duplicates for r in results)),
        ("overflow", sum(r.overflow for r in results)),
        ("late", sum(r.late for r in results)),
    ):
        if n:
            counter.labels(outcome).inc(n)


class Assembler:
    def __init__(
        self,
        config: AssemblerConfig,
        store: TraceStore,
        emitter: Emitter,
        topics: Topics,
        metrics: AssemblerMetrics,
        runtime_metrics: RuntimeMetrics | None = None,
    ) -> None:
        self.config = config
        self.runtime_metrics = runtime_metrics  # ragmon_worker_dead_letters_total, which the alerts read
        self.store = store
        self.emitter = emitter
        self.topics = topics
        self.m = metrics
        self._kind_counts: dict[str, int] = {}
        self._unknown_counts: dict[str, int] = {}
        self._log_counts: dict[str, int] = {}  # joined, no_span, unread: per tick, like the kinds

    # -- consuming ---------------------------------------------------------

    def store_spans(self, records: list[SpanRecord], now: float | None = None) -> None:
        """Store the spans, produce the feedback they carry, wait for every acknowledgement. Raises on outages."""
        items = [self._entries(record) for record in records]
        _count_added(self.m.spans, self.store.add_many([i for i in items if i[3]], now or time.time()))
        self.emitter.wait()

    def _entries(self, record: SpanRecord) -> tuple[str, str, bytes, list[SpanEntry]]:
        entries: list[SpanEntry] = []
        resource = b""
        for rs, _, span in record.spans():
            resource = resource or rs.resource.SerializeToString()
            payload = span.SerializeToString()
            kind, annotated = _kind_and_annotations(span, payload)
            if kind is None:
                kind = _genai_kind(span, payload)
            if annotated:
                view = SpanView.of(span)
                self._feedback(record, view)
                if view.links:
                    self.m.spans.labels("feedback").inc()
                    continue  # a feedback carrier, not part of the RAG trace
            parent = span.parent_span_id
            span_class = ROOT if not parent else MAPPED if kind in MAPPED_KINDS else OTHER
            entries.append(SpanEntry(span.span_id.hex(), span_class, payload))
        return record.tenant, record.trace_id, resource, entries

    def _feedback(self, record: SpanRecord, view: SpanView) -> None:
        events, skipped = feedback_events(record.tenant, record.trace_id, view)
        for reason, n in skipped.items():
            self.m.annotations_skipped.labels(reason).inc(n)
        for event in events:
            self._emit_feedback(record.tenant, event)

    def _emit_feedback(self, tenant: str, event: FeedbackEvent) -> None:
        value = stored_event(event.id, "feedback", tenant, event.timestamp, event.body)
        self.emitter.emit(
            self.topics.feedback,
            record_key("feedback", tenant, event.body),
            value,
            event_headers(event.id, "feedback", tenant),
        )
        self.m.feedback_emitted.labels(tenant).inc()

    def store_logs(self, records: list[LogsRecord], now: float | None = None) -> None:
        """Store the log records beside their traces' spans (early or late within the wait). Raises on outages."""
        items = [item for item in (log_entries(record) for record in records) if item[2]]
        _count_added(self.m.log_records, self.store.add_logs(items, now or time.time()))

    # -- assembling --------------------------------------------------------

    def tick(self, now: float | None = None) -> int:
        """Assemble every due trace (up to max_traces_per_tick); returns the trace events produced."""
        now = now or time.time()
        self._kind_counts = {}  # what a failed tick counted is counted again when the trace is redone
        self._unknown_counts = {}
        self._log_counts = {}
        due = self.store.claim_due(now, self.config.max_traces_per_tick)
        finished: list[tuple[OpenTrace, str | None]] = []
        for (tenant, trace_id), trace in zip(due, self.store.load_many(due), strict=True):
            if trace is None:
                self.store.forget(tenant, trace_id)
            elif trace.root is not None:
                finished.append((trace, self._emit_guarded(trace)))
            elif now - trace.last_seen >= self.config.root_wait_s:
                finished.append((trace, "no_root" if trace.spans else _LOGS_ONLY))
            else:
                self.store.reschedule(tenant, trace_id, trace.last_seen + self.config.root_wait_s)
        try:
            self.emitter.wait()
        except (
            RecordTooLarge
        ):  # a broker whose limit is below ours refused one event: find it, trace by trace
            finished = self._emit_each(finished)
        kind_counts = self._kind_counts
        for kind, n in kind_counts.items():
            self.m.trace_spans.labels(kind.lower() if kind in OPENINFERENCE_KINDS else "other").inc(n)
        for convention, n in self._unknown_counts.items():
            self.m.unknown_attributes.labels(convention if convention in CONVENTIONS else "other").inc(n)
        late = self.store.finish_many([trace for trace, _ in finished])  # acknowledged: now the state may go
        by_tenant: dict[str, int] = {}
        log_counts = self._log_counts
        self._log_counts = {}
        for (trace, drop_reason), (late_spans, late_logs) in zip(finished, late, strict=True):
            if late_spans:
                self.m.spans.labels("late").inc(late_spans)
            if late_logs:
                self.m.log_records.labels("late").inc(late_logs)
            if drop_reason in ("no_root", _LOGS_ONLY) and trace.logs:  # never assembled: joined to nothing
                log_counts["no_trace"] = log_counts.get("no_trace", 0) + len(trace.logs)
            if drop_reason == _LOGS_ONLY:
                continue  # log records whose spans never came: not a trace
            if drop_reason is not None:
                self.m.traces_dropped.labels(drop_reason).inc()
            else:
                by_tenant[trace.tenant] = by_tenant.get(trace.tenant, 0) + 1
        for outcome, n in log_counts.items():
            if n:
                self.m.log_records.labels(outcome).inc(n)
        for tenant, n in by_tenant.items():
            self.m.traces_emitted.labels(tenant).inc(n)
        emitted = sum(by_tenant.values())
        if due:
            self.m.pending.set(self.store.pending())
        return emitted

    def _emit_each(self, finished: list[tuple[OpenTrace, str | None]]) -> list[tuple[OpenTrace, str | None]]:
        """Emit and acknowledge the tick's events one by one (ids are deterministic: a repeat is deduped)."""
        counts, unknown, logs = self._kind_counts, self._unknown_counts, self._log_counts
        out: list[tuple[OpenTrace, str | None]] = []
        for trace, drop_reason in finished:
            if drop_reason is None:
                try:
                    drop_reason = self._emit_trace(trace)
                    self.emitter.wait()
                except RecordTooLarge as exc:
                    drop_reason = self._dead_letter_trace(trace, poison_reason(exc), poison_detail(exc))
            out.append((trace, drop_reason))
        self._kind_counts, self._unknown_counts, self._log_counts = counts, unknown, logs  # counted once
        return out

    def _emit_guarded(self, trace: OpenTrace) -> str | None:
        """_emit_trace; a trace whose handling raises a poison exception is dead-lettered alone, never retried.

        Retrying it would fail every tick that claims it, and with it the other traces of the tick, whatever
        their tenant. An outage (Redis, the broker) still raises: the tick is retried.
        """
        try:
            return self._emit_trace(trace)
        except Exception as exc:
            if not (is_poison(exc) or isinstance(exc, DecodeError)):
                raise
            log.warning(
                "trace %s/%s dead-lettered: handling it raised %s",
                trace.tenant,
                trace.trace_id,
                type(exc).__name__,
                exc_info=True,
            )
            return self._dead_letter_trace(trace, poison_reason(exc), poison_detail(exc))

    def _dead_letter_trace(self, trace: OpenTrace, reason: DeadLetterReason, detail: str) -> str:
        """The trace's stored spans as one spans record on the dead-letter topic, and its stored log records
        (POST /v1/logs) as one logs record beside it; returns the drop reason.

        Assembled from several records, they have no single source offset: partition and offset are -1. Each
        is a dead letter of its own topic (its source-topic header), counted once.
        """
        data = TracesData()
        rs = data.resource_spans.add()
        if trace.resource:
            rs.resource.ParseFromString(trace.resource)
        scope = rs.scope_spans.add()
        for payload in trace.spans:
            scope.spans.add().ParseFromString(payload)
        records = [(self.topics.spans, encode_span_record(trace.tenant, trace.trace_id, data))]
        if trace.logs:
            logs = LogsData()
            log_scope = logs.resource_logs.add().scope_logs.add()
            for payload in trace.logs:
                log_scope.log_records.add().ParseFromString(payload)
            records.append((self.topics.logs, encode_logs_record(trace.tenant, trace.trace_id, logs)))
        for topic, (key, value, headers) in records:
            source = SourceRecord(topic, -1, -1, key, 0)
            emit_dead_letter(
                self.emitter,
                self.topics.dlq,
                key,
                value,
                dlq_headers(source, headers, reason, detail, WORKER),
            )
            if self.runtime_metrics is not None:
                self.runtime_metrics.dead_letters.labels(WORKER, reason).inc()
        return "invalid_trace" if reason is DeadLetterReason.INVALID_BODY else str(reason)

    def _emit_trace(self, trace: OpenTrace) -> str | None:
        """Produce the trace's event; returns the drop reason instead when it has none."""
        spans = [SpanView.of(Span.FromString(payload)) for payload in trace.spans]
        if trace.logs:  # GenAI message events (POST /v1/logs) folded into their spans' messages
            joined = join(spans, trace.logs)
            for outcome, n in zip(joined._fields, joined, strict=True):
                self._log_counts[outcome] = self._log_counts.get(outcome, 0) + n
        resource = attribute_map(Resource.FromString(trace.resource).attributes) if trace.resource else {}
        result = assemble(TraceSpans(trace.trace_id, spans, resource))  # what it raises: _emit_guarded
        for kind, n in result.counts.items():  # counted per tick: one metric update per kind, not per trace
            self._kind_counts[kind] = self._kind_counts.get(kind, 0) + n
        for convention, n in result.unknown.items():
            self._unknown_counts[convention] = self._unknown_counts.get(convention, 0) + n
        if result.body is None:
            log.info(
                "trace %s/%s dropped: %s (%s)",
                trace.tenant,
                trace.trace_id,
                result.drop_reason,
                result.detail,
            )
            if (
                result.drop_reason == "invalid_trace"
            ):  # the client's data breaks the contract: kept, with the rule
                return self._dead_letter_trace(trace, DeadLetterReason.INVALID_BODY, result.detail)
            return result.drop_reason
        event_id = trace_event_id(trace.tenant, trace.trace_id)
        at = datetime.fromtimestamp(result.start_ns / 1e9, UTC)
        value = stored_event(event_id, "trace", trace.tenant, at, result.body)
        self.emitter.emit(
            self.topics.traces,
            record_key("trace", trace.tenant, result.body),
            value,
            event_headers(event_id, "trace", trace.tenant),
        )
        root_end = max((s.end_ns for s in spans if not s.parent_id), default=0)
        if root_end:
            self.m.assembly_delay.observe(max(0.0, time.time() - root_end / 1e9))
        return None
