"""Raw OTLP spans on the spans topic: one Kafka record per (tenant, OTLP trace id, request).

The API splits each accepted `ExportTraceServiceRequest` by trace id and produces one
record per trace; the assembler worker and the span forwarder consume them. The layout
is documented in docs/otlp.md ("The spans topic"):

- value: `opentelemetry.proto.trace.v1.TracesData` serialised as protobuf, holding only
  that trace's ResourceSpans / ScopeSpans / Spans (resource and scope kept), already
  redacted;
- key: `<tenant>/<32 hex trace id>`, so every span of a trace lands on one partition;
- headers: H_TENANT, H_EVENT_ID (uuid5 of tenant, trace id and the value's bytes, so a
  resent export is recognisably the same record), H_EVENT_TYPE = `otlp_spans`,
  H_SCHEMA = `1`, H_TRACE_ID (hex), H_SPAN_COUNT.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData

from service.contracts import topics as T

SPANS_EVENT_TYPE = "otlp_spans"
SPANS_SCHEMA = b"1"
H_TRACE_ID = "ragmon-otlp-trace-id"
H_SPAN_COUNT = "ragmon-otlp-span-count"

# Fixed namespaces: ids derived from them are stable across processes and releases.
SPAN_RECORD_NAMESPACE = uuid.UUID("5d0c7a8e-3b8f-5f3e-9a51-0f2b6c1e7a10")
TRACE_EVENT_NAMESPACE = uuid.UUID("8f4e2c61-7d0a-5b9c-b3e4-2a6d9c0f1e35")
_NAMESPACE_BYTES = TRACE_EVENT_NAMESPACE.bytes
D = TypeVar("D")
P = TypeVar("P", bound=Message)


class SpanRecordError(ValueError):
    """A spans-topic record that cannot be decoded (dead-lettered by consumers)."""


@dataclass(frozen=True)
class OtlpRecord(Generic[D]):
    """One record of raw OTLP telemetry, decoded: a SpanRecord here, a LogsRecord in logs.py."""

    tenant: str
    trace_id: str  # 32 lowercase hex digits
    event_id: str
    data: D  # the record's protobuf: TracesData, LogsData


@dataclass(frozen=True)
class SpanRecord(OtlpRecord[TracesData]):
    """One record of the spans topic, decoded."""

    def spans(self) -> Iterator[tuple[ResourceSpans, ScopeSpans, Span]]:
        for rs in self.data.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    yield rs, ss, span

    @property
    def span_count(self) -> int:
        return count_spans(self.data)


def count_spans(data: TracesData) -> int:
    return sum(len(ss.spans) for rs in data.resource_spans for ss in rs.scope_spans)


def spans_key(tenant: str, trace_id_hex: str) -> bytes:
    return f"{tenant}/{trace_id_hex}".encode()


def otlp_record_id(namespace: uuid.UUID, tenant: str, trace_id_hex: str, value: bytes) -> str:
    """Idempotency id of a record of raw OTLP telemetry: same tenant, trace and bytes -> same id."""
    digest = hashlib.sha256(value).hexdigest()
    return str(uuid.uuid5(namespace, f"{tenant}/{trace_id_hex}/{digest}"))


def span_record_id(tenant: str, trace_id_hex: str, value: bytes) -> str:
    """Idempotency id of a record: same tenant, trace and bytes -> same id."""
    return otlp_record_id(SPAN_RECORD_NAMESPACE, tenant, trace_id_hex, value)


def trace_event_id(tenant: str, trace_id_hex: str) -> str:
    """The native trace event's id for an OTLP trace: a replay or a re-assembly yields the same id."""
    # uuid.uuid5, written out: the same UUID without building a UUID object (one per trace event)
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + f"{tenant}/{trace_id_hex}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def encode_span_record(
    tenant: str, trace_id_hex: str, data: TracesData
) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """Key, value and headers of the record carrying one trace's spans of one export."""
    value = data.SerializeToString(deterministic=True)
    event_id = span_record_id(tenant, trace_id_hex, value)
    headers = otlp_headers(
        SPANS_EVENT_TYPE, SPANS_SCHEMA, tenant, trace_id_hex, event_id, (H_SPAN_COUNT, count_spans(data))
    )
    return spans_key(tenant, trace_id_hex), value, headers


def otlp_headers(
    event_type: str, schema: bytes, tenant: str, trace_id_hex: str, event_id: str, count: tuple[str, int]
) -> list[tuple[str, bytes]]:
    """The headers of a record of raw OTLP telemetry (spans here, log records in logs.py)."""
    return [
        (T.H_EVENT_ID, event_id.encode()),
        (T.H_EVENT_TYPE, event_type.encode()),
        (T.H_TENANT, tenant.encode()),
        (T.H_SCHEMA, schema),
        (H_TRACE_ID, trace_id_hex.encode()),
        (count[0], str(count[1]).encode()),
    ]


def checked_headers(
    headers: list[tuple[str, bytes]] | None, event_type: str, schema: bytes
) -> tuple[dict[str, bytes], str]:
    """The headers of a record of raw OTLP telemetry as a dict, and its tenant; SpanRecordError names what is
    wrong with them."""
    found = {k: v for k, v in headers or []}
    if found.get(T.H_EVENT_TYPE) != event_type.encode():
        raise SpanRecordError(f"header {T.H_EVENT_TYPE} is not {event_type!r}")
    if found.get(T.H_SCHEMA) != schema:
        raise SpanRecordError(f"header {T.H_SCHEMA} is {found.get(T.H_SCHEMA)!r}; this reader knows schema 1")
    tenant = found.get(T.H_TENANT, b"").decode("utf-8", "replace")
    if not tenant:
        raise SpanRecordError(f"header {T.H_TENANT} is missing")
    return found, tenant


def parsed_value(data: P, value: bytes) -> P:
    """`data` (an empty TracesData, LogsData) parsed from a record's value; SpanRecordError when it is not one."""
    try:
        data.ParseFromString(value)
    except DecodeError as exc:
        raise SpanRecordError(f"value is not a {type(data).__name__} protobuf: {exc}") from exc
    return data


def decode_span_record(value: bytes, headers: list[tuple[str, bytes]] | None) -> SpanRecord:
    """Parse a spans-topic record; raise SpanRecordError naming what is wrong."""
    found, tenant = checked_headers(headers, SPANS_EVENT_TYPE, SPANS_SCHEMA)
    data = parsed_value(TracesData(), value)
    trace_ids = {span.trace_id for rs in data.resource_spans for ss in rs.scope_spans for span in ss.spans}
    if len(trace_ids) != 1 or len(next(iter(trace_ids))) != 16:
        raise SpanRecordError(
            f"record must hold spans of exactly one 16-byte trace id, found {len(trace_ids)}"
        )
    trace_hex = next(iter(trace_ids)).hex()
    event_id = found.get(T.H_EVENT_ID, b"").decode() or span_record_id(tenant, trace_hex, value)
    return SpanRecord(tenant, trace_hex, event_id, data)


def split_by_trace(request_spans: list[ResourceSpans]) -> dict[bytes, TracesData]:
    """Regroup an export's spans by trace id, keeping each span's resource and scope.

    Spans whose trace id is invalid must have been removed by the caller.
    """
    out: dict[bytes, TracesData] = {}
    resources: dict[tuple[bytes, int], ResourceSpans] = {}
    scopes: dict[tuple[bytes, int, int], ScopeSpans] = {}
    for ri, rs in enumerate(request_spans):
        for si, ss in enumerate(rs.scope_spans):
            for span in ss.spans:
                tid = span.trace_id
                target = scopes.get((tid, ri, si))
                if target is None:
                    holder = resources.get((tid, ri))
                    if holder is None:
                        holder = out.setdefault(tid, TracesData()).resource_spans.add()
                        holder.resource.CopyFrom(rs.resource)
                        holder.schema_url = rs.schema_url
                        resources[(tid, ri)] = holder
                    target = holder.scope_spans.add()
                    target.scope.CopyFrom(ss.scope)
                    target.schema_url = ss.schema_url
                    scopes[(tid, ri, si)] = target
                target.spans.append(span)
    return out
