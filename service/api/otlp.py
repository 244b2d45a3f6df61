"""The ingestion pipeline of POST /v1/traces and POST /v1/logs (OTLP/HTTP), free of HTTP and Kafka.

Body bytes -> ExportTraceServiceRequest (protobuf, or OTLP JSON with hex ids) ->
per-span id checks (invalid spans are rejected and counted by reason, the rest
go on) -> PII redaction of free-text string attributes and a cap on attribute
length -> one spans-topic record per trace id (service/contracts/spans.py).
Log records take the same steps (ExportLogsServiceRequest; a record needs a trace
id and a span id, its body is redacted like an attribute) to the logs topic
(service/contracts/logs.py). The wire rules are in docs/otlp.md.
"""

from __future__ import annotations

import base64
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, LogsData, ResourceLogs, ScopeLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData

from service.api.ingest_body import decompress, inflate
from service.api.ingest_errors import IngestError
from service.api.ingest_redact import redact_metadata, redact_value
from service.api.producer import OutgoingRecord, record_bytes
from service.api.redaction import Pseudonymizer, Redactor, identifier_key
from service.contracts import vocabulary as L
from service.contracts.logs import count_log_records, encode_logs_record
from service.contracts.spans import encode_span_record, split_by_trace
from service.contracts.topics import Topics

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

# Attribute values that are identifiers, names or structured metadata, not prose: redacting
# digits out of them would break joins (a UUID's last group looks like a phone number).
_KEEP_SUFFIXES = (
    ".id",
    "_id",
    "metadata",
    ".mime_type",
    ".model_name",
    ".name",
    "span.kind",
    ".provider",
    ".system",
    ".role",
)
_DOCUMENT_CONTENT = ".document.content"
# Identifiers of people: replaced whole by a keyed hash (OpenInference user.id, session.id; OTel enduser.id).
_PSEUDONYMIZED = ("user.id", "session.id")
# Attributes holding JSON whose values are compared downstream (metadata, filters, exclusion samples).
_DOCUMENT_METADATA = ".document.metadata"
FILTERS_ATTRIBUTE = "ragmon.retrieval.filters"
EXCLUSION_ATTRIBUTE = "ragmon.retrieval.exclusion_sample"
_JSON_ATTRIBUTES = frozenset({"metadata", FILTERS_ATTRIBUTE, EXCLUSION_ATTRIBUTE})
# Keys for a span's (or span event's) name and its status message: prose, no keep suffix.
SPAN_NAME, STATUS_MESSAGE = "(span name)", "(status message)"
# Key of a log record's body (its nested values under `(log body).inner`): prose unless a keep suffix says not.
LOG_BODY = "(log body)"
_BAD_HEX = b"\xff" * 3  # marks an id that was not hex in JSON: no valid id is 3 bytes long


@dataclass
class OtlpBatch:
    records: list[OutgoingRecord]
    accepted_spans: int
    rejected: Counter[str] = field(default_factory=Counter)
    truncated_values: int = 0
    redactions: Counter[str] = field(default_factory=Counter)
    tenant: str = ""
    record_spans: list[int] = field(default_factory=list)  # spans in each of `records`
    # What the batch holds: spans (SPAN_PROBLEMS) or log records (LOG_PROBLEMS), for its messages.
    noun: str = "span"
    problems: dict[str, str] = field(default_factory=dict)  # empty: SPAN_PROBLEMS

    def add_record(
        self,
        topic: str,
        encoded: tuple[bytes, bytes, list[tuple[str, bytes]]],
        n: int,
        traceparent: bytes | None,
    ) -> None:
        """One encoded record of `n` spans (or log records); one over MAX_RECORD_BYTES is refused, its `n` counted."""
        key, value, headers = encoded
        if traceparent:
            headers.append(("traceparent", traceparent))
        record = OutgoingRecord(topic, key, value, headers)
        if record_bytes(record) > L.MAX_RECORD_BYTES:
            self.rejected["record_too_large"] += n
            self.accepted_spans -= n
            return
        self.records.append(record)
        self.record_spans.append(n)

    def refuse_records(self, indexes: set[int], reason: str) -> None:
        """The records at `indexes` (one trace's spans each) refused alone, their spans counted by reason."""
        for i in indexes:
            self.rejected[reason] += self.record_spans[i]
            self.accepted_spans -= self.record_spans[i]
        self.records = [r for i, r in enumerate(self.records) if i not in indexes]
        self.record_spans = [n for i, n in enumerate(self.record_spans) if i not in indexes]

    @property
    def rejected_spans(self) -> int:
        return sum(self.rejected.values())

    def message(self, max_value_chars: int) -> str:
        """The partial-success error message: every reason with its count."""
        parts = [
            f"{n} {self.noun}(s): {(self.problems or SPAN_PROBLEMS)[reason]}"
            for reason, n in sorted(self.rejected.items())
        ]
        if self.truncated_values:
            parts.append(
                f"{self.truncated_values} attribute value(s) truncated to {max_value_chars} characters"
            )
        return "; ".join(parts)


def _hex_to_b64(value: Any) -> str:
    if not isinstance(value, str):
        return base64.b64encode(_BAD_HEX).decode()
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError:
        return base64.b64encode(_BAD_HEX).decode()


def _convert_ids(holder: Any, names: tuple[str, ...]) -> None:
    if isinstance(holder, dict):
        for name in names:
            if name in holder:
                holder[name] = _hex_to_b64(holder[name])


def _list(holder: Any, *names: str) -> list[Any]:
    """The first list found under one of `names`; anything else is left for the protobuf parser to refuse."""
    if isinstance(holder, dict):
        for name in names:
            if isinstance(holder.get(name), list):
                return list(holder[name])
    return []


def _hex_ids_to_base64(doc: dict[str, Any]) -> None:
    """OTLP JSON carries ids as hex; protobuf's JSON mapping expects base64 for bytes fields."""
    for rs in _list(doc, "resourceSpans", "resource_spans"):
        for ss in _list(rs, "scopeSpans", "scope_spans"):
            for span in _list(ss, "spans"):
                _convert_ids(
                    span, ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id")
                )
                for link in _list(span, "links"):
                    _convert_ids(link, ("traceId", "trace_id", "spanId", "span_id"))


def _hex_log_ids_to_base64(doc: dict[str, Any]) -> None:
    for rl in _list(doc, "resourceLogs", "resource_logs"):
        for sl in _list(rl, "scopeLogs", "scope_logs"):
            for record in _list(sl, "logRecords", "log_records"):
                _convert_ids(record, ("traceId", "trace_id", "spanId", "span_id"))


def decompress_body(raw: bytes, encoding: str | None, limit: int) -> bytes:
    """gzip and identity as on /v1/events; also deflate (zlib), which the OTel SDK's exporter can send."""
    if (encoding or "").strip().lower() != "deflate":
        return decompress(raw, encoding, limit)
    return inflate(raw, limit, zlib.MAX_WBITS, "deflate", "deflate (zlib) data")


def parse_request(data: bytes, content_type: str) -> ExportTraceServiceRequest:
    """Decode the body in its encoding; a body that does not decode is a 400."""
    request = ExportTraceServiceRequest()
    _parse_into(request, data, content_type, _hex_ids_to_base64)
    return request


def parse_logs_request(data: bytes, content_type: str) -> ExportLogsServiceRequest:
    """parse_request for POST /v1/logs."""
    request = ExportLogsServiceRequest()
    _parse_into(request, data, content_type, _hex_log_ids_to_base64)
    return request


def _parse_into(request: Message, data: bytes, content_type: str, hex_ids: Any) -> None:
    name = type(request).__name__
    if content_type == PROTOBUF:
        try:
            request.ParseFromString(data)
        except DecodeError as exc:
            raise IngestError(
                400,
                f"body is not a valid {name} protobuf: {exc}",
                field="body",
                rule="otlp_protobuf",
            ) from exc
        return
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise IngestError(400, f"body is not valid JSON: {exc}", field="body", rule="json") from exc
    if not isinstance(doc, dict):
        raise IngestError(400, f"body must be a JSON object ({name})", field="body", rule="object")
    hex_ids(doc)
    try:
        json_format.ParseDict(doc, request, ignore_unknown_fields=True, max_recursion_depth=64)
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as exc:
        raise IngestError(
            400,
            f"body is not a valid OTLP JSON {name}: {exc}",
            field="body",
            rule="otlp_json",
        ) from exc


# Why a span is rejected: a closed set (metric label) -> the words a client can act on.
SPAN_PROBLEMS = {
    "trace_id_not_hex": "traceId is not a hex string",
    "missing_trace_id": "span without trace id",
    "trace_id_length": "invalid trace id length (must be 16 bytes, 32 hex digits)",
    "trace_id_zero": "trace id is all zeros",
    "span_id_not_hex": "spanId is not a hex string",
    "missing_span_id": "span without span id",
    "span_id_length": "invalid span id length (must be 8 bytes, 16 hex digits)",
    "span_id_zero": "span id is all zeros",
    "parent_span_id_invalid": "invalid parent span id (must be empty or 8 bytes, 16 hex digits)",
    "end_before_start": "endTimeUnixNano is before startTimeUnixNano",
    "record_too_large": f"the spans of its trace in this export encode to more than {L.MAX_RECORD_BYTES} bytes "
    "(max_record_bytes): export them in smaller batches or with shorter attributes",
    "record_refused": "the broker refused its trace's record as too large or invalid (record_refused)",
}


# Why a log record is rejected (metric label) -> the words a client can act on. A record must name the
# span it belongs to: the assembler joins it to that span, and has nothing to join one without.
LOG_PROBLEMS = {
    "trace_id_not_hex": "traceId is not a hex string",
    "missing_trace_id": "log record without trace id (emit it inside the span it belongs to)",
    "trace_id_length": "invalid trace id length (must be 16 bytes, 32 hex digits)",
    "trace_id_zero": "trace id is all zeros",
    "span_id_not_hex": "spanId is not a hex string",
    "missing_span_id": "log record without span id (emit it inside the span it belongs to)",
    "span_id_length": "invalid span id length (must be 8 bytes, 16 hex digits)",
    "span_id_zero": "span id is all zeros",
    "record_too_large": f"one log record encodes to more than {L.MAX_RECORD_BYTES} bytes (max_record_bytes)",
    "record_refused": "the broker refused its trace's record as too large or invalid (record_refused)",
}


def _id_problem(tid: bytes, sid: bytes) -> str | None:
    checks = (
        (tid == _BAD_HEX, "trace_id_not_hex"),
        (not tid, "missing_trace_id"),
        (len(tid) != 16, "trace_id_length"),
        (tid == bytes(16), "trace_id_zero"),
        (sid == _BAD_HEX, "span_id_not_hex"),
        (not sid, "missing_span_id"),
        (len(sid) != 8, "span_id_length"),
        (sid == bytes(8), "span_id_zero"),
    )
    return next((problem for failed, problem in checks if failed), None)


def span_problem(span: Span) -> str | None:
    """The SPAN_PROBLEMS key of why a span cannot be accepted; None when it is valid."""
    problem = _id_problem(span.trace_id, span.span_id)
    if problem is not None:
        return problem
    if span.parent_span_id and len(span.parent_span_id) != 8:
        return "parent_span_id_invalid"
    if span.end_time_unix_nano and span.end_time_unix_nano < span.start_time_unix_nano:
        return "end_before_start"
    return None


def log_problem(record: LogRecord) -> str | None:
    """The LOG_PROBLEMS key of why a log record cannot be accepted; None when it is valid."""
    return _id_problem(record.trace_id, record.span_id)


# A nested value's key keeps its first and last characters: enough for every prefix and suffix rule
# above, and a deep key-value list of long keys costs its depth times this, not its depth squared
# times the key length (30 levels of 300 kB keys held 140 MB of key prefixes while being walked).
_KEY_HEAD, _KEY_TAIL = 64, 256


def nested_key(key: str, inner: str) -> str:
    """`key.inner`, cut to its first _KEY_HEAD and last _KEY_TAIL characters when longer."""
    joined = f"{key}.{inner}"
    return joined if len(joined) <= _KEY_HEAD + _KEY_TAIL else joined[:_KEY_HEAD] + "~" + joined[-_KEY_TAIL:]


def pseudonymous_user(tenant: str, user_id: str, pseudonyms: Pseudonymizer) -> str:
    """`user.id` (and `session.id`) is never stored in clear: a keyed per-tenant hash still groups one
    user's traces, and is the native `session_id`'s pseudonym for the same session."""
    return pseudonyms.identifier(tenant, user_id)


def _span_count(data: TracesData) -> int:
    return sum(len(ss.spans) for rs in data.resource_spans for ss in rs.scope_spans)


# A record's value leaves room for its key and headers under MAX_RECORD_BYTES.
_VALUE_BUDGET = L.MAX_RECORD_BYTES - 4096


def _bounded_parts(data: TracesData, spans: int) -> list[TracesData]:
    """One trace's spans of one export in parts that each fit one record (halved until they do).

    The assembler joins a trace's records whatever their number, so a big trace is split rather than
    refused; only a single span over the limit stays too big (and is refused alone)."""
    if spans <= 1 or data.ByteSize() <= _VALUE_BUDGET:
        return [data]
    half = spans // 2
    first, second = TracesData(), TracesData()
    seen = 0
    for rs in data.resource_spans:
        for ss in rs.scope_spans:
            n = len(ss.spans)
            cut = min(max(half - seen, 0), n)
            if cut:
                _copy_scope(first, rs, ss, ss.spans[:cut])
            if cut < n:
                _copy_scope(second, rs, ss, ss.spans[cut:])
            seen += n
    return _bounded_parts(first, half) + _bounded_parts(second, spans - half)


def _copy_scope(target: TracesData, rs: ResourceSpans, ss: ScopeSpans, spans: Any) -> None:
    _copy_entry(target.resource_spans.add(), rs, ss, "scope_spans").spans.extend(spans)


def _copy_entry(out: Any, resource_entry: Any, scope_entry: Any, scopes: str) -> Any:
    """A resource entry's resource and one scope entry's scope copied into `out` (a new ResourceSpans or
    ResourceLogs); returns the new scope entry, for its spans or log records."""
    out.resource.CopyFrom(resource_entry.resource)
    out.schema_url = resource_entry.schema_url
    out_scope = getattr(out, scopes).add()
    out_scope.scope.CopyFrom(scope_entry.scope)
    out_scope.schema_url = scope_entry.schema_url
    return out_scope


def _log_parts(records: list[tuple[ResourceLogs, ScopeLogs, LogRecord]]) -> list[LogsData]:
    """One trace's log records of one export, packed in order into LogsData parts that each fit one
    record (resource and scope kept); a record too big alone is a part alone (and is refused)."""
    parts: list[LogsData] = []
    data, size, last = LogsData(), 0, None
    out_sl: ScopeLogs | None = None
    for rl, sl, record in records:
        cost = record.ByteSize() + 16
        if size and size + cost > _VALUE_BUDGET:
            parts.append(data)
            data, size, last = LogsData(), 0, None
        if last != (id(rl), id(sl)) or out_sl is None:
            out_sl = _copy_entry(data.resource_logs.add(), rl, sl, "scope_logs")
            size += rl.resource.ByteSize() + sl.scope.ByteSize() + 16
            last = (id(rl), id(sl))
        out_sl.log_records.append(record)
        size += cost
    if size:
        parts.append(data)
    return parts


class SpanPreparer:
    """Turns a decoded export into spans-topic records (one per trace id)."""

    def __init__(
        self,
        topics: Topics,
        redactor: Redactor | None,
        max_value_chars: int,
        pseudonyms: Pseudonymizer | None = None,
    ) -> None:
        self.topics = topics
        self.redactor = redactor
        self.max_value_chars = max_value_chars
        self.pseudonyms = pseudonyms or (redactor.pseudonyms if redactor is not None else Pseudonymizer())

    def prepare(
        self, request: ExportTraceServiceRequest, tenant: str, traceparent: bytes | None
    ) -> OtlpBatch:
        batch = OtlpBatch([], 0, tenant=tenant)
        kept: list[ResourceSpans] = []
        per_trace: Counter[bytes] = Counter()
        for rs in request.resource_spans:
            self._clean_attributes(rs.resource.attributes, batch)
            for ss in rs.scope_spans:
                self._clean_attributes(ss.scope.attributes, batch)
                valid = []
                for span in ss.spans:
                    problem = span_problem(span)
                    if problem is not None:
                        batch.rejected[problem] += 1
                        continue
                    self._clean_span(span, batch)
                    valid.append(span)
                    per_trace[span.trace_id] += 1
                del ss.spans[:]
                ss.spans.extend(valid)
                batch.accepted_spans += len(valid)
            kept.append(rs)
        for trace_id, data in split_by_trace(kept).items():
            for part in _bounded_parts(data, per_trace[trace_id]):
                # one span over the limit: that span alone is refused
                encoded = encode_span_record(tenant, trace_id.hex(), part)
                batch.add_record(self.topics.spans, encoded, _span_count(part), traceparent)
        return batch

    def prepare_logs(
        self, request: ExportLogsServiceRequest, tenant: str, traceparent: bytes | None
    ) -> OtlpBatch:
        """The log records of an export as logs-topic records: one per trace (more where one trace's do not
        fit one record), each record checked (ids), its body and attributes redacted as span attributes are."""
        batch = OtlpBatch([], 0, tenant=tenant, noun="log record", problems=LOG_PROBLEMS)
        per_trace: dict[bytes, list[tuple[ResourceLogs, ScopeLogs, LogRecord]]] = {}
        for rl in request.resource_logs:
            self._clean_attributes(rl.resource.attributes, batch)
            for sl in rl.scope_logs:
                self._clean_attributes(sl.scope.attributes, batch)
                for record in sl.log_records:
                    problem = log_problem(record)
                    if problem is not None:
                        batch.rejected[problem] += 1
                        continue
                    self._clean_value(LOG_BODY, record.body, batch)
                    self._clean_attributes(record.attributes, batch)
                    per_trace.setdefault(record.trace_id, []).append((rl, sl, record))
                    batch.accepted_spans += 1
        for trace_id, records in per_trace.items():
            for part in _log_parts(records):  # one log record over the limit: refused alone
                encoded = encode_logs_record(tenant, trace_id.hex(), part)
                batch.add_record(self.topics.logs, encoded, count_log_records(part), traceparent)
        return batch

    def _clean_span(self, span: Span, batch: OtlpBatch) -> None:
        # A span's name and status message are client text too ("GET /users/jane@example.com").
        span.name = self._clean_text(SPAN_NAME, span.name, batch)
        if span.status.message:
            span.status.message = self._clean_text(STATUS_MESSAGE, span.status.message, batch)
        self._clean_attributes(span.attributes, batch)
        for event in span.events:
            event.name = self._clean_text(SPAN_NAME, event.name, batch)
            self._clean_attributes(event.attributes, batch)
        for link in span.links:
            self._clean_attributes(link.attributes, batch)

    def _clean_attributes(self, attributes: Any, batch: OtlpBatch) -> None:
        kv: KeyValue
        for kv in attributes:
            self._clean_value(kv.key, kv.value, batch)

    def _clean_value(self, key: str, value: AnyValue, batch: OtlpBatch) -> None:
        """One attribute value: strings in arrays and key-value lists (under `key.inner`) alike."""
        which = value.WhichOneof("value")
        if which == "string_value":
            text = self._clean_text(key, value.string_value, batch)
            if text != value.string_value:
                value.string_value = text
        elif which == "array_value":
            for item in value.array_value.values:
                self._clean_value(key, item, batch)
        elif which == "kvlist_value":
            for kv in value.kvlist_value.values:
                self._clean_value(nested_key(key, kv.key), kv.value, batch)

    def _clean_text(self, key: str, text: str, batch: OtlpBatch) -> str:
        if key.endswith(_PSEUDONYMIZED):
            return pseudonymous_user(batch.tenant, text, self.pseudonyms)
        if len(text) > self.max_value_chars:
            text = text[: self.max_value_chars]
            batch.truncated_values += 1
        redactor = self.redactor
        if redactor is None:
            return text
        if key.endswith(_DOCUMENT_METADATA) or key in _JSON_ATTRIBUTES:
            return self._redact_json(key, text, batch)
        if key.endswith(_KEEP_SUFFIXES) or key.startswith("ragmon."):
            return text
        if key.endswith(_DOCUMENT_CONTENT):
            return redactor.redact_document(text, batch.redactions)
        return redactor.redact(text, batch.redactions)

    def _redact_json(self, key: str, text: str, batch: OtlpBatch) -> str:
        """Metadata, filters and exclusion samples sent as JSON text: their values get the keyed marks
        of native metadata and predicates (so the assembled trace matches a native one); text that is
        not a JSON object is one value."""
        assert self.redactor is not None
        redactor, counts, tenant = self.redactor, batch.redactions, batch.tenant
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            doc = None
        if not isinstance(doc, dict):
            return redactor.redact_value(text, counts, tenant)
        before = orjson.dumps(doc)
        if key == FILTERS_ATTRIBUTE:
            _redact_filters(doc, redactor, counts, tenant)
        elif key == EXCLUSION_ATTRIBUTE:
            for candidate in doc.get("candidates") or []:
                redact_metadata(candidate, redactor, counts, tenant)
        else:
            redact_metadata({"metadata": doc}, redactor, counts, tenant)
            if isinstance(doc.get(FILTERS_ATTRIBUTE), dict):
                _redact_filters(doc[FILTERS_ATTRIBUTE], redactor, counts, tenant)
            sample = doc.get(EXCLUSION_ATTRIBUTE)
            for candidate in (sample.get("candidates") or []) if isinstance(sample, dict) else []:
                redact_metadata(candidate, redactor, counts, tenant)
        after = orjson.dumps(doc)
        return text if after == before else after.decode()


def _redact_filters(filters: dict[str, Any], redactor: Redactor, counts: Counter[str], tenant: str) -> None:
    for side in ("entitlement", "relevance"):
        predicates = filters.get(side)
        for predicate in predicates if isinstance(predicates, list) else []:
            if (
                isinstance(predicate, dict)
                and "value" in predicate
                and not identifier_key(str(predicate.get("field")))
            ):
                predicate["value"] = redact_value(predicate["value"], redactor, counts, tenant)
