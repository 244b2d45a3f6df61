"""Builders of OTLP exports for the /v1/traces tests: protobuf messages, spec-shaped JSON, SDK spans."""

from __future__ import annotations

import os
import time
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from service.contracts.spans import SpanRecord, decode_span_record


def new_trace_id() -> bytes:
    return os.urandom(16)


def new_span_id() -> bytes:
    return os.urandom(8)


def kv(key: str, value: str | int | float | bool) -> KeyValue:
    out = KeyValue(key=key)
    if isinstance(value, bool):
        out.value.bool_value = value
    elif isinstance(value, int):
        out.value.int_value = value
    elif isinstance(value, float):
        out.value.double_value = value
    else:
        out.value.string_value = value
    return out


def export_of(spans: list[Span], service: str = "rag-app") -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(kv("service.name", service))
    ss = rs.scope_spans.add()
    ss.scope.name = "tests"
    ss.spans.extend(spans)
    return request


def span(
    trace_id: bytes,
    name: str = "step",
    parent: bytes = b"",
    attrs: dict[str, Any] | None = None,
    start_ns: int | None = None,
    duration_ns: int = 1_000_000,
) -> Span:
    start = start_ns if start_ns is not None else time.time_ns()
    out = Span(
        trace_id=trace_id,
        span_id=new_span_id(),
        parent_span_id=parent,
        name=name,
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=start,
        end_time_unix_nano=start + duration_ns,
    )
    out.attributes.extend(kv(k, v) for k, v in (attrs or {}).items())
    return out


def json_span(
    trace_hex: str,
    span_hex: str,
    name: str = "step",
    parent_hex: str = "",
    attrs: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One span as the OTLP JSON encoding writes it: hex ids, lowerCamelCase, int enums, 64-bit ints as strings."""
    start = time.time_ns()
    out: dict[str, Any] = {
        "traceId": trace_hex,
        "spanId": span_hex,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 2_000_000),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in (attrs or {}).items()],
        "status": {"code": 1},
        "someFieldFromTheFuture": {"ignored": True},
    }
    if parent_hex:
        out["parentSpanId"] = parent_hex
    return out


def json_export(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "rag-app"}},
                        {"key": "host.cpus", "value": {"intValue": "8"}},
                    ]
                },
                "scopeSpans": [{"scope": {"name": "tests", "version": "1"}, "spans": spans}],
            }
        ]
    }


def span_records(kafka: Any, topic: str) -> list[SpanRecord]:
    return [decode_span_record(r.value, r.headers) for r in kafka.records(topic)]


def attributes(span_message: Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in span_message.attributes:
        which = item.value.WhichOneof("value")
        out[item.key] = getattr(item.value, which) if which else None
    return out
