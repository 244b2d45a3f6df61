"""Raw OTLP log records on the logs topic: one Kafka record per (tenant, OTLP trace id, request).

POST /v1/logs (docs/otlp.md, "The receiver: `POST /v1/logs`") splits each accepted `ExportLogsServiceRequest` by trace id
and produces one record per trace (more when one trace's records would not fit one); the assembler
joins them to their trace's spans. They have a topic of their own, not the spans topic, because every
consumer of the spans topic (the forwarder, the evaluations worker) reads each of its records as spans.

- value: `opentelemetry.proto.logs.v1.LogsData` serialised as protobuf, holding only that trace's
  ResourceLogs / ScopeLogs / LogRecords, every record with a valid trace id and span id, redacted;
- key: `<tenant>/<32 hex trace id>`, as for spans (service/contracts/spans.py);
- headers: H_TENANT, H_EVENT_ID (uuid5 of tenant, trace id and the value's bytes), H_EVENT_TYPE =
  `otlp_logs`, H_SCHEMA = `1`, H_TRACE_ID (hex), H_RECORD_COUNT.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, LogsData, ResourceLogs, ScopeLogs

from service.contracts import topics as T
from service.contracts.spans import (
    OtlpRecord,
    SpanRecordError,
    checked_headers,
    otlp_headers,
    otlp_record_id,
    parsed_value,
    spans_key,
)

LOGS_EVENT_TYPE = "otlp_logs"
LOGS_SCHEMA = b"1"
H_RECORD_COUNT = "ragmon-otlp-log-record-count"
LOG_RECORD_NAMESPACE = uuid.UUID("0b6f3d52-9c1e-5a47-8e2d-7f4a1c9b3e68")


@dataclass(frozen=True)
class LogsRecord(OtlpRecord[LogsData]):
    """One record of the logs topic, decoded."""

    def log_records(self) -> Iterator[tuple[ResourceLogs, ScopeLogs, LogRecord]]:
        for rl in self.data.resource_logs:
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    yield rl, sl, record


def count_log_records(data: LogsData) -> int:
    return sum(len(sl.log_records) for rl in data.resource_logs for sl in rl.scope_logs)


def logs_record_id(tenant: str, trace_id_hex: str, value: bytes) -> str:
    return otlp_record_id(LOG_RECORD_NAMESPACE, tenant, trace_id_hex, value)


def encode_logs_record(
    tenant: str, trace_id_hex: str, data: LogsData
) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """Key, value and headers of the record carrying one trace's log records of one export."""
    value = data.SerializeToString(deterministic=True)
    event_id = logs_record_id(tenant, trace_id_hex, value)
    count = (H_RECORD_COUNT, count_log_records(data))
    return (
        spans_key(tenant, trace_id_hex),
        value,
        otlp_headers(LOGS_EVENT_TYPE, LOGS_SCHEMA, tenant, trace_id_hex, event_id, count),
    )


def decode_logs_record(value: bytes, headers: list[tuple[str, bytes]] | None) -> LogsRecord:
    """Parse a logs-topic record; raise SpanRecordError naming what is wrong."""
    found, tenant = checked_headers(headers, LOGS_EVENT_TYPE, LOGS_SCHEMA)
    data = parsed_value(LogsData(), value)
    ids = {
        (r.trace_id, len(r.span_id))
        for rl in data.resource_logs
        for sl in rl.scope_logs
        for r in sl.log_records
    }
    trace_ids = {tid for tid, _ in ids}
    if len(trace_ids) != 1 or len(next(iter(trace_ids))) != 16 or {n for _, n in ids} != {8}:
        raise SpanRecordError(
            f"record must hold log records of exactly one 16-byte trace id, each with an 8-byte span id; "
            f"found {len(trace_ids)} trace id(s)"
        )
    trace_hex = next(iter(trace_ids)).hex()
    event_id = found.get(T.H_EVENT_ID, b"").decode() or logs_record_id(tenant, trace_hex, value)
    return LogsRecord(tenant, trace_hex, event_id, data)
