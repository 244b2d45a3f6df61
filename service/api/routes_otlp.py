"""POST /v1/traces and POST /v1/logs: OTLP/HTTP trace and log export (protobuf and JSON), status
semantics in docs/otlp.md.

Answers follow the OTLP/HTTP specification: 200 with an ExportTraceServiceResponse (or
ExportLogsServiceResponse; partial success names every rejection reason), errors as a
google.rpc.Status, both in the request's encoding; 200 only after Kafka acknowledged every
record. Both signals take the same steps (auth, body and decompressed-size caps, entry counts
before the parse, rate limit, redaction): only what is counted and produced differs (_Signal).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request, Response
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc.status_pb2 import Status
from opentelemetry import trace
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from prometheus_client import Counter

from service.api import admission, wire
from service.api.auth import AuthError, Principal
from service.api.ingest_body import refuse_deep
from service.api.ingest_errors import IngestError
from service.api.otlp import JSON, PROTOBUF, OtlpBatch, decompress_body, parse_logs_request, parse_request
from service.api.producer import BrokerUnavailable
from service.api.routes_events import (
    BYTES_PER_TOKEN,
    _read_body,
    cpu_debt,
    cpu_timed,
    off_loop,
    prepaid_tokens,
    pretoken,
)
from service.api.state import STATE_KEY, ApiState, BodyHold
from service.api.telemetry import current_traceparent, extract_context
from service.contracts import vocabulary as L

log = logging.getLogger("ragmon.api.otlp")
router = APIRouter()
tracer = trace.get_tracer("ragmon.api")

# google.rpc.Code of each HTTP status we answer with.
_RPC_CODE = {400: 3, 401: 16, 403: 7, 408: 4, 413: 3, 415: 3, 429: 8, 503: 14}
_CONTENT_TYPES = {
    "application/x-protobuf": PROTOBUF,
    "application/protobuf": PROTOBUF,
    "application/json": JSON,
}
# The rate limiter charges one token per BYTES_PER_TOKEN decompressed bytes, besides one per span
# and per resource or scope entry: an export of no spans still costs what it took to read.


class _Limited(Exception):
    def __init__(self, response: Response) -> None:
        super().__init__("rate limited")
        self.response = response


def _encode(message: Message, encoding: str, status: int, headers: dict[str, str] | None = None) -> Response:
    if encoding == PROTOBUF:
        return Response(message.SerializeToString(), status_code=status, media_type=PROTOBUF, headers=headers)
    body = json_format.MessageToJson(message, indent=None)
    return Response(body, status_code=status, media_type=JSON, headers=headers)


def _refuse(status: int, message: str, encoding: str, headers: dict[str, str] | None = None) -> Response:
    return _encode(Status(code=_RPC_CODE.get(status, 2), message=message), encoding, status, headers)


def _content_type(request: Request) -> str:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    encoding = _CONTENT_TYPES.get(ctype)
    if encoding is None:
        raise IngestError(
            415,
            f"Content-Type must be application/x-protobuf or application/json, got {ctype or 'none'!r}",
            field="Content-Type",
            rule="otlp_content_type",
        )
    return encoding


def _count_entries(request: Any, signal: _Signal) -> wire.ExportCounts:
    resources = getattr(request, signal.resources_field)
    counts = wire.ExportCounts(resources=len(resources))
    for rs in resources:
        scopes = getattr(rs, signal.scopes_field)
        counts.scopes += len(scopes)
        counts.spans += sum(len(getattr(ss, signal.items_field)) for ss in scopes)
    return counts


def _check_json_shape(data: bytes, max_resources: int, max_scopes: int, signal: _Signal) -> None:
    """Depth, resource and scope entries of an OTLP JSON body from its bytes, before orjson builds it.

    resourceSpans' (resourceLogs') entries are the values at depth 2; at depth 4 sit the scopeSpans
    (scopeLogs) entries and the few members of each entry's resource object (at most 4 counted per entry)."""
    shape = wire.json_shape(data, (2, 4))
    refuse_deep(shape.max_depth)
    resources, scopes = signal.json_resources, signal.json_scopes
    if shape.items[2] > max_resources:
        raise IngestError(
            413,
            f"{shape.items[2]} {resources} entries in one export; at most {max_resources}",
            field=resources,
            rule="otlp_max_resource_entries",
        )
    if shape.items[4] > max_scopes + 4 * shape.items[2]:
        raise IngestError(
            413,
            f"more than {max_scopes} {scopes} entries in one export; lower the exporter's batch size",
            field=resources,
            rule="otlp_max_scope_entries",
        )


def _count_wire(data: bytes, max_items: int, signal: _Signal) -> None:
    """The protobuf entry counts (wire.count_export): ExportLogsServiceRequest frames its resource, scope
    and record entries with the field numbers of ExportTraceServiceRequest, so one scan counts both;
    its refusals name the signal's fields."""
    try:
        wire.count_export(data, L.OTLP_MAX_RESOURCE_ENTRIES, L.OTLP_MAX_SCOPE_ENTRIES, max_items)
    except IngestError as exc:
        if signal is TRACES:
            raise
        message = exc.message.replace("resourceSpans", signal.json_resources)
        message = message.replace("scopeSpans", signal.json_scopes).replace(
            " spans ", f" {signal.json_items} "
        )
        message = message.replace("ExportTraceServiceRequest", signal.request_name)
        field = signal.json_resources if exc.field == TRACES.json_resources else exc.field
        raise IngestError(exc.status, message, field=field, rule=exc.rule) from None


def _parse(
    data: bytes, encoding: str, max_spans: int, signal: _Signal | None = None
) -> tuple[Any, wire.ExportCounts]:
    """Counted from the wire first (refused before anything is built), then parsed and counted (spans unless
    `signal` says otherwise)."""
    signal = signal or TRACES
    if encoding == PROTOBUF:
        _count_wire(data, max_spans, signal)
    else:
        _check_json_shape(data, L.OTLP_MAX_RESOURCE_ENTRIES, L.OTLP_MAX_SCOPE_ENTRIES, signal)
    export = signal.parse(data, encoding)
    counts = _count_entries(export, signal)
    if counts.spans > max_spans:
        raise IngestError(
            413,
            f"{counts.spans} {signal.json_items} in one export; at most {max_spans}: lower the exporter's "
            "batch size",
            field=signal.json_resources,
            rule="otlp_max_spans_per_request",
        )
    return export, counts


def rate_cost(counts: wire.ExportCounts, decompressed_bytes: int) -> int:
    """Tokens an export takes: one per span, per resource or scope entry, and per BYTES_PER_TOKEN read."""
    return counts.spans + counts.entries + decompressed_bytes // BYTES_PER_TOKEN


async def _rate_limit(
    state: ApiState, principal: Principal, cost: int, encoding: str, debit: bool = False, what: str = "spans"
) -> Response | None:
    # A request of the largest allowed span count must fit in the bucket, or it could never pass;
    # one that costs more than the bucket (its entries and bytes on top) takes a full bucket.
    over = await admission.take(state, principal, cost, state.settings.otlp_max_spans_per_request, log, debit)
    if over is None:
        return None
    return _refuse(429, over.message(what), encoding, over.headers)


async def _produce(state: ApiState, batch: OtlpBatch, encoding: str, rejected: Counter) -> Response | None:
    s = state.settings
    n = len(batch.records)
    retry = {"Retry-After": str(s.retry_after_s)}
    if not state.producer.up:
        state.metrics.shed.labels("broker_down").inc()
        return _refuse(
            503,
            f"broker unavailable ({state.producer.last_error}); nothing was accepted, retry",
            encoding,
            retry,
        )
    if state.inflight_events + n > s.max_inflight_events:
        state.metrics.shed.labels("overloaded").inc()
        return _refuse(
            503,
            f"{state.inflight_events} records await acknowledgement; over the limit of "
            f"{s.max_inflight_events}; retry",
            encoding,
            retry,
        )
    state.inflight_events += n
    state.metrics.inflight_events.set(state.inflight_events)
    started = time.perf_counter()
    try:
        refused = await state.producer.produce(batch.records, s.produce_timeout_s)
        before = batch.rejected["record_refused"]
        batch.refuse_records(refused, "record_refused")
        if refused:
            rejected.labels("record_refused").inc(batch.rejected["record_refused"] - before)
    except BrokerUnavailable as exc:
        state.metrics.shed.labels("broker_down").inc()
        return _refuse(503, f"broker did not acknowledge ({exc}); retry the export", encoding, retry)
    finally:
        state.inflight_events -= n
        state.metrics.inflight_events.set(state.inflight_events)
    state.metrics.produce_seconds.observe(time.perf_counter() - started)
    return None


@dataclass(frozen=True, slots=True)
class _Decoded:
    principal: Principal
    encoding: str
    export: Any
    cost: int  # tokens still to take (what it costs beyond what was taken before the parse)
    paid: int  # tokens it costs in all
    size: int  # decompressed bytes
    cpu_s: float  # thread CPU of the parse


async def _decode(request: Request, state: ApiState, signal: _Signal, hold: BodyHold) -> _Decoded:
    """The caller, the body's encoding, the export, its rate-limit cost, decompressed size and parse CPU."""
    s = state.settings
    principal = state.keys.authenticate(request.headers.get("authorization"))
    encoding = _content_type(request)
    raw = await _read_body(request, s.max_body_bytes, s.body_timeout_s, hold, principal.tenant)
    content_encoding = request.headers.get("content-encoding")
    paid = pretoken(content_encoding)  # over its rate: refused before inflating
    limited = await _rate_limit(state, principal, paid, encoding, what=signal.json_items)
    if limited is not None:
        raise _Limited(limited)
    slots = state.thread_slots(principal.tenant)
    data = await off_loop(
        len(raw),
        bool(content_encoding),
        decompress_body,
        raw,
        content_encoding,
        s.max_decompressed_bytes,
        slots=slots,
    )
    # paid before the parse, so a refused big body costs its sender
    prepaid = max(0, prepaid_tokens(len(data)) - paid)
    limited = await _rate_limit(
        state, principal, prepaid, encoding, debit=True, what=signal.json_items
    )  # inflated: paid even if refused
    if limited is not None:
        raise _Limited(limited)
    prepaid += paid
    (export, counts), cpu_s = await off_loop(
        len(data), False, cpu_timed, _parse, data, encoding, s.otlp_max_spans_per_request, signal, slots=slots
    )
    paid = rate_cost(counts, len(data))
    return _Decoded(principal, encoding, export, paid - prepaid, paid, len(data), cpu_s)


@dataclass(frozen=True)
class _Signal:
    """What differs between /v1/traces and /v1/logs: the messages, their field names and the metrics."""

    request_name: str
    json_resources: str  # the OTLP JSON names, also the `field` of refusals
    json_scopes: str
    json_items: str
    resources_field: str  # the protobuf names
    scopes_field: str
    items_field: str
    rejected_field: str  # of the response's partial_success
    parse: Callable[[bytes, str], Any]
    prepare: Callable[[ApiState], Callable[..., OtlpBatch]]
    response_type: type[ExportTraceServiceResponse] | type[ExportLogsServiceResponse]
    accepted: Callable[[ApiState], Counter]
    rejected: Callable[[ApiState], Counter]

    def response(self, batch: OtlpBatch, message: str) -> Message:
        """The export's answer; a partial success when `message` says what was rejected."""
        response = self.response_type()
        if message:
            setattr(response.partial_success, self.rejected_field, batch.rejected_spans)
            response.partial_success.error_message = message
        return response


TRACES = _Signal(
    "ExportTraceServiceRequest",
    "resourceSpans",
    "scopeSpans",
    "spans",
    "resource_spans",
    "scope_spans",
    "spans",
    "rejected_spans",
    parse_request,
    lambda state: state.span_preparer.prepare,
    ExportTraceServiceResponse,
    lambda state: state.metrics.otlp_spans_accepted,
    lambda state: state.metrics.otlp_spans_rejected,
)
LOGS = _Signal(
    "ExportLogsServiceRequest",
    "resourceLogs",
    "scopeLogs",
    "logRecords",
    "resource_logs",
    "scope_logs",
    "log_records",
    "rejected_log_records",
    parse_logs_request,
    lambda state: state.span_preparer.prepare_logs,
    ExportLogsServiceResponse,
    lambda state: state.metrics.otlp_log_records_accepted,
    lambda state: state.metrics.otlp_log_records_rejected,
)


@router.post("/v1/traces", summary="OTLP/HTTP trace export (OpenInference and GenAI spans), protobuf or JSON")
async def export_traces(request: Request) -> Response:
    return await _export(request, TRACES)


@router.post(
    "/v1/logs", summary="OTLP/HTTP log export (GenAI message events of traced spans), protobuf or JSON"
)
async def export_logs(request: Request) -> Response:
    return await _export(request, LOGS)


async def _export(request: Request, signal: _Signal) -> Response:
    state: ApiState = getattr(request.state, STATE_KEY)
    hold = BodyHold(state)
    try:
        return await _export_held(request, signal, state, hold)
    finally:
        hold.release()


async def _export_held(request: Request, signal: _Signal, state: ApiState, hold: BodyHold) -> Response:
    # Until the Content-Type is known, errors go out as JSON (readable by every client).
    encoding = _CONTENT_TYPES.get(request.headers.get("content-type", "").split(";")[0].strip().lower(), JSON)
    name = "ingest.otlp" if signal is TRACES else "ingest.otlp_logs"
    with tracer.start_as_current_span(name, context=extract_context(dict(request.headers))) as span:
        try:
            decoded = await _decode(request, state, signal, hold)
        except AuthError as exc:
            return _refuse(exc.status, exc.message, encoding, admission.challenge(exc))
        except _Limited as limited_early:
            return limited_early.response
        except IngestError as exc:
            where = f" ({exc.field}: {exc.rule})" if exc.field else ""
            return _refuse(exc.status, exc.message + where, encoding, exc.headers)
        principal, encoding = decoded.principal, decoded.encoding
        span.set_attribute("ragmon.tenant", principal.tenant)
        limited = await _rate_limit(state, principal, decoded.cost, encoding, what=signal.json_items)
        if limited is not None:
            return limited
        batch, prepare_cpu_s = await off_loop(
            decoded.size,
            False,
            cpu_timed,
            signal.prepare(state),
            decoded.export,
            principal.tenant,
            current_traceparent(),
            slots=state.thread_slots(principal.tenant),
        )
        # CPU beyond twice what the export paid (thousands of empty attributes in one span cost
        # ~20 times an ordinary span's per token): debt of the tenant's bucket, as on /v1/events
        owed = cpu_debt(decoded.cpu_s + prepare_cpu_s, decoded.paid)
        await admission.charge(state, principal, owed, state.settings.otlp_max_spans_per_request, log)
        rejected = signal.rejected(state)
        _count(state, batch, rejected)
        message = batch.message(state.settings.otlp_max_attribute_chars)
        what = "span" if signal is TRACES else "log record"
        if batch.rejected_spans and not batch.accepted_spans:
            return _refuse(400, f"no {what} in the export is valid: {message}", encoding)
        failed = await _produce(state, batch, encoding, rejected)
        if failed is not None:
            return failed
        message = batch.message(state.settings.otlp_max_attribute_chars)  # the broker may have refused some
        if batch.rejected_spans and not batch.accepted_spans:  # not retryable (OTLP/HTTP: 400)
            return _refuse(400, f"no {what} in the export was accepted: {message}", encoding)
        signal.accepted(state).labels(principal.tenant).inc(batch.accepted_spans)
        span.set_attribute(
            "ragmon.spans.accepted" if signal is TRACES else "ragmon.log_records.accepted",
            batch.accepted_spans,
        )
        return _encode(signal.response(batch, message), encoding, 200)


def _count(state: ApiState, batch: OtlpBatch, rejected: Counter) -> None:
    for reason, n in batch.rejected.items():
        rejected.labels(reason).inc(n)
    if batch.truncated_values:
        state.metrics.otlp_values_truncated.inc(batch.truncated_values)
    for kind, n in batch.redactions.items():
        state.metrics.redactions.labels(kind).inc(n)
