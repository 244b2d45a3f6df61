"""POST /v1/logs against a running API on the session broker: the SDK's log exporter, spec JSON, every refusal.

What reached the logs topic is read back and decoded with the contract helpers (service/contracts/logs.py),
so "200" is checked to mean "durable in Kafka, one record per trace, redacted, every record in a span".
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
from google.rpc.status_pb2 import Status
from opentelemetry._logs import LogRecord as ApiLogRecord
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from service.contracts import topics as T
from service.contracts.logs import H_RECORD_COUNT, LOGS_EVENT_TYPE, LogsRecord, decode_logs_record
from tests.service.api.api_events import ACME_KEY, READONLY_KEY
from tests.service.api.api_harness import KafkaReader, RunningApi
from tests.service.api.otlp_builders import kv, new_span_id, new_trace_id
from workers.assembler.view import any_value, attribute_map

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}


def auth(key: str = ACME_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def log_records(kafka: KafkaReader, topic: str) -> list[LogsRecord]:
    return [decode_logs_record(r.value, list(r.headers)) for r in kafka.records(topic)]


def log_record(
    trace_id: bytes, span_id: bytes, content: str = "hi", name: str = "gen_ai.user.message"
) -> LogRecord:
    out = LogRecord(trace_id=trace_id, span_id=span_id, event_name=name, time_unix_nano=time.time_ns())
    out.body.kvlist_value.values.append(kv("content", content))
    return out


def export_of(records: list[LogRecord]) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    rl = request.resource_logs.add()
    rl.resource.attributes.append(kv("service.name", "rag-app"))
    sl = rl.scope_logs.add()
    sl.scope.name = "tests"
    sl.log_records.extend(records)
    return request


def json_log(trace_hex: str, span_hex: str, content: str) -> dict[str, object]:
    """One log record as the OTLP JSON encoding writes it: hex ids, lowerCamelCase, 64-bit ints as strings."""
    return {
        "timeUnixNano": str(time.time_ns()),
        "traceId": trace_hex,
        "spanId": span_hex,
        "eventName": "gen_ai.choice",
        "body": {
            "kvlistValue": {
                "values": [
                    {"key": "index", "value": {"intValue": "0"}},
                    {"key": "finish_reason", "value": {"stringValue": "stop"}},
                    {
                        "key": "message",
                        "value": {
                            "kvlistValue": {
                                "values": [
                                    {"key": "role", "value": {"stringValue": "assistant"}},
                                    {"key": "content", "value": {"stringValue": content}},
                                ]
                            }
                        },
                    },
                ]
            }
        },
        "attributes": [{"key": "gen_ai.system", "value": {"stringValue": "openai"}}],
    }


def json_export(records: list[dict[str, object]]) -> dict[str, object]:
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "rag-app"}}]},
                "scopeLogs": [{"scope": {"name": "tests"}, "logRecords": records}],
            }
        ]
    }


def test_sdk_exporter_records_of_spans_land_one_record_per_trace_redacted(
    api: RunningApi, kafka: KafkaReader
) -> None:
    tracer = TracerProvider().get_tracer("tests")
    provider = LoggerProvider(resource=Resource.create({"service.name": "rag-app"}))
    exporter = OTLPLogExporter(endpoint=f"{api.url}/v1/logs", headers=auth(), timeout=10)
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))  # one export at shutdown
    logger = provider.get_logger("tests")
    ids = []
    for i in range(2):
        with tracer.start_as_current_span(f"chat {i}") as span:
            ids.append(span.get_span_context())
            for role in ("system", "user"):
                logger.emit(
                    ApiLogRecord(
                        event_name=f"gen_ai.{role}.message", body={"content": f"mail ann{i}@example.com"}
                    )
                )
    provider.shutdown()
    raw = kafka.records(api.topics.logs)
    records = log_records(kafka, api.topics.logs)
    assert sorted(r.trace_id for r in records) == sorted(f"{c.trace_id:032x}" for c in ids)
    for rec, msg in zip(records, raw, strict=True):
        headers = dict(msg.headers)
        assert headers[T.H_EVENT_TYPE] == LOGS_EVENT_TYPE.encode() and headers[T.H_TENANT] == b"acme"
        assert headers[H_RECORD_COUNT] == b"2" and msg.key == f"acme/{rec.trace_id}".encode()
        for _, _, log in rec.log_records():
            assert log.event_name in ("gen_ai.system.message", "gen_ai.user.message")
            content = any_value(log.body)["content"]
            assert "@example.com" not in content and "[REDACTED_EMAIL]" in content
    assert api.metric("ragmon_api_otlp_log_records_accepted_total", {"tenant": "acme"}) == 4
    assert api.metric("ragmon_api_redactions_total", {"kind": "email"}) == 4


def test_spec_json_with_hex_ids_answers_json(api: RunningApi, kafka: KafkaReader) -> None:
    trace_hex, span_hex = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    response = api.http.post(
        "/v1/logs",
        content=orjson.dumps(json_export([json_log(trace_hex, span_hex, "Hold the pin button.")])),
        headers={**auth(), "Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.json() == {}
    [record] = log_records(kafka, api.topics.logs)
    [(_, _, log)] = list(record.log_records())
    assert record.trace_id == trace_hex and log.span_id.hex() == span_hex
    assert any_value(log.body)["message"] == {"role": "assistant", "content": "Hold the pin button."}
    assert attribute_map(log.attributes) == {"gen_ai.system": "openai"}


def test_protobuf_partial_success_drops_records_outside_a_span(api: RunningApi, kafka: KafkaReader) -> None:
    tid = new_trace_id()
    records = [
        log_record(tid, new_span_id()),
        log_record(tid, new_span_id()),
        log_record(tid, b""),  # an application log outside any span
        log_record(b"", b""),
        log_record(tid, b"\x01" * 4),
    ]
    response = api.http.post(
        "/v1/logs", content=export_of(records).SerializeToString(), headers={**auth(), **PB}
    )
    assert response.status_code == 200 and response.headers["content-type"] == "application/x-protobuf"
    partial = ExportLogsServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_log_records == 3
    for words in ("log record without span id", "log record without trace id", "invalid span id length"):
        assert f"1 log record(s): {words}" in partial.error_message
    [record] = log_records(kafka, api.topics.logs)
    assert len(list(record.log_records())) == 2
    assert api.metric("ragmon_api_otlp_log_records_rejected_total", {"reason": "missing_span_id"}) == 1
    assert api.metric("ragmon_api_otlp_log_records_rejected_total", {"reason": "missing_trace_id"}) == 1
    assert api.metric("ragmon_api_otlp_log_records_accepted_total", {"tenant": "acme"}) == 2
    assert kafka.records(api.topics.spans) == []  # their own topic: no spans-topic consumer sees them


def test_only_records_outside_spans_is_400(api: RunningApi, kafka: KafkaReader) -> None:
    body = orjson.dumps(json_export([json_log("5b8efff798038103d269b633813fc60c", "", "x")]))
    response = api.http.post("/v1/logs", content=body, headers={**auth(), **JS})
    assert response.status_code == 400 and response.json()["code"] == 3
    assert "no log record in the export is valid" in response.json()["message"]
    assert "log record without span id" in response.json()["message"]
    assert kafka.records(api.topics.logs) == []


def test_malformed_bodies_are_400_naming_the_field(api: RunningApi, kafka: KafkaReader) -> None:
    whole = export_of([log_record(new_trace_id(), new_span_id(), "x" * 200)]).SerializeToString()
    truncated = api.http.post("/v1/logs", content=whole[:-50], headers={**auth(), **PB})
    assert truncated.status_code == 400 and truncated.headers["content-type"] == "application/x-protobuf"
    message = Status.FromString(truncated.content).message
    assert "not a valid ExportLogsServiceRequest" in message and "(body: otlp_protobuf)" in message
    for bad, field in (
        (b"{not json", "body: json"),
        (b"[1, 2]", "body: object"),
        (b'{"resourceLogs": "nope"}', "resourceLogs"),
        (b'{"resourceLogs": [{"scopeLogs": 7}]}', "scopeLogs"),
        (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"timeUnixNano": "soon"}]}]}]}', "timeUnixNano"),
    ):
        response = api.http.post("/v1/logs", content=bad, headers={**auth(), **JS})
        assert response.status_code == 400, bad
        assert field in response.json()["message"], (bad, response.json())
    assert kafka.records(api.topics.logs) == []


def test_auth_and_content_type(api: RunningApi) -> None:
    body = export_of([log_record(new_trace_id(), new_span_id())]).SerializeToString()
    missing = api.http.post("/v1/logs", content=body, headers=PB)
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert missing.headers["content-type"] == "application/x-protobuf"
    assert api.http.post("/v1/logs", content=body, headers={**auth("nope"), **PB}).status_code == 401
    assert api.http.post("/v1/logs", content=body, headers={**auth(READONLY_KEY), **PB}).status_code == 403
    for ctype in ("text/plain", "application/xml", ""):
        response = api.http.post("/v1/logs", content=b"{}", headers={**auth(), "Content-Type": ctype})
        assert response.status_code == 415, ctype
        assert "application/x-protobuf or application/json" in response.json()["message"]
    assert api.http.post("/v1/logs", content=b"{}", headers={**auth(), **JS}).status_code == 200


def test_size_caps_are_413(start_api: Callable[..., RunningApi], redis_client: object) -> None:
    api = start_api(otlp_max_spans_per_request=10)
    big = export_of([log_record(new_trace_id(), new_span_id(), "a" * (10 * 1024 * 1024))]).SerializeToString()
    response = api.http.post("/v1/logs", content=big, headers={**auth(), **PB})
    assert response.status_code == 413 and "max_body_bytes" in Status.FromString(response.content).message
    tid = new_trace_id()
    many = export_of([log_record(tid, new_span_id()) for _ in range(11)])
    too_many = api.http.post("/v1/logs", content=many.SerializeToString(), headers={**auth(), **PB})
    message = Status.FromString(too_many.content).message
    assert too_many.status_code == 413 and "at most 10" in message
    assert "logRecords in one export" in message and "(resourceLogs: otlp_max_spans_per_request)" in message
    as_json = orjson.dumps(json_export([json_log(tid.hex(), new_span_id().hex(), "x") for _ in range(11)]))
    too_many_json = api.http.post("/v1/logs", content=as_json, headers={**auth(), **JS})
    assert (
        too_many_json.status_code == 413 and "11 logRecords in one export" in too_many_json.json()["message"]
    )
