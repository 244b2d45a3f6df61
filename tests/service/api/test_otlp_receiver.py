"""POST /v1/traces against a running API on the session broker: the SDK's exporter, spec JSON, every refusal.

What reached the spans topic is read back and decoded with the contract helpers, so
"200" is checked to mean "durable in Kafka, one record per trace, redacted".
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable

import orjson
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from service.api.otlp import pseudonymous_user
from service.api.redaction import Pseudonymizer
from service.contracts import topics as T
from service.contracts.spans import H_SPAN_COUNT, SPANS_EVENT_TYPE
from service.contracts.vocabulary import MAX_RECORD_BYTES
from tests.service.api.api_events import ACME_KEY, GLOBEX_KEY, READONLY_KEY
from tests.service.api.api_harness import PSEUDONYM_KEY, KafkaReader, RunningApi
from tests.service.api.otlp_builders import (
    attributes,
    export_of,
    json_export,
    json_span,
    new_trace_id,
    span,
    span_records,
)

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}


def auth(key: str = ACME_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def sdk_spans(traces: int = 2) -> list[ReadableSpan]:
    """Finished SDK spans of `traces` small RAG-shaped traces."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests")
    for i in range(traces):
        root = {
            "openinference.span.kind": "CHAIN",
            "input.value": f"mail me at ann{i}@example.com",
            "session.id": "123e4567-e89b-12d3-a456-426614174000",
            "user.id": "ann@example.com",
        }
        with (
            tracer.start_as_current_span("rag", attributes=root),
            tracer.start_as_current_span("retrieve", attributes={"openinference.span.kind": "RETRIEVER"}),
        ):
            pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_sdk_exporter_spans_land_one_record_per_trace_redacted(api: RunningApi, kafka: KafkaReader) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{api.url}/v1/traces", headers=auth(), timeout=10)
    assert exporter.export(sdk_spans(traces=2)) == SpanExportResult.SUCCESS
    exporter.shutdown()
    raw = kafka.records(api.topics.spans)
    records = span_records(kafka, api.topics.spans)
    assert len(records) == 2 and {r.span_count for r in records} == {2}
    for rec, msg in zip(records, raw, strict=True):
        headers = dict(msg.headers)
        assert headers[T.H_EVENT_TYPE] == SPANS_EVENT_TYPE.encode() and headers[T.H_TENANT] == b"acme"
        assert headers[H_SPAN_COUNT] == b"2" and msg.key == f"acme/{rec.trace_id}".encode()
        root = next(s for _, _, s in rec.spans() if not s.parent_span_id)
        attrs = attributes(root)
        assert "@example.com" not in attrs["input.value"] and "[REDACTED_EMAIL]" in attrs["input.value"]
        pseudonyms = Pseudonymizer(PSEUDONYM_KEY.encode())  # sessions and users never in clear
        assert attrs["session.id"] == pseudonymous_user(
            "acme", "123e4567-e89b-12d3-a456-426614174000", pseudonyms
        )
        assert attrs["user.id"] == pseudonymous_user("acme", "ann@example.com", pseudonyms)
    assert api.metric("ragmon_api_otlp_spans_accepted_total", {"tenant": "acme"}) == 4
    assert api.metric("ragmon_api_redactions_total", {"kind": "email"}) == 2


def test_sdk_exporter_with_gzip_and_deflate(api: RunningApi, kafka: KafkaReader) -> None:
    for compression in (Compression.Gzip, Compression.Deflate):
        exporter = OTLPSpanExporter(
            endpoint=f"{api.url}/v1/traces", headers=auth(), timeout=10, compression=compression
        )
        assert exporter.export(sdk_spans(traces=3)) == SpanExportResult.SUCCESS, compression
        exporter.shutdown()
    assert sum(r.span_count for r in span_records(kafka, api.topics.spans)) == 12
    big = export_of([span(new_trace_id(), attrs={"input.value": "x" * 600_000})]).SerializeToString()
    bomb = api.http.post(
        "/v1/traces", content=zlib.compress(big), headers={**auth(), **PB, "Content-Encoding": "deflate"}
    )
    assert bomb.status_code == 413
    small = export_of([span(new_trace_id(), attrs={"input.value": "x" * 2000})]).SerializeToString()
    broken = api.http.post(
        "/v1/traces",
        content=zlib.compress(small)[:-20],
        headers={**auth(), **PB, "Content-Encoding": "deflate"},
    )
    assert broken.status_code == 400 and "truncated" in Status.FromString(broken.content).message
    other = api.http.post("/v1/traces", content=big[:10], headers={**auth(), **PB, "Content-Encoding": "br"})
    assert other.status_code == 415


def test_spec_json_with_hex_ids_answers_json(api: RunningApi, kafka: KafkaReader) -> None:
    trace_hex, root_hex, child_hex = (
        "5b8efff798038103d269b633813fc60c",
        "eee19b7ec3c1b174",
        "eee19b7ec3c1b173",
    )
    body = json_export(
        [json_span(trace_hex, root_hex, "rag"), json_span(trace_hex, child_hex, "llm", root_hex)]
    )
    response = api.http.post(
        "/v1/traces",
        content=orjson.dumps(body),
        headers={**auth(), "Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.json() == {}
    [record] = span_records(kafka, api.topics.spans)
    assert record.trace_id == trace_hex
    ids = {s.span_id.hex(): s.parent_span_id.hex() for _, _, s in record.spans()}
    assert ids == {root_hex: "", child_hex: root_hex}
    resource = record.data.resource_spans[0].resource
    assert {a.key: a.value.WhichOneof("value") for a in resource.attributes}["host.cpus"] == "int_value"


def test_partial_success_names_every_reason(api: RunningApi, kafka: KafkaReader) -> None:
    good = json_span("5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174")
    short = json_span("5b8efff798038103d269b633813fc6", "eee19b7ec3c1b175")
    missing = json_span("", "eee19b7ec3c1b176")
    del missing["traceId"]
    not_hex = json_span("zz8efff798038103d269b633813fc60c", "eee19b7ec3c1b177")
    response = api.http.post(
        "/v1/traces",
        content=orjson.dumps(json_export([good, short, missing, not_hex])),
        headers={**auth(), **JS},
    )
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "3"
    for words in ("invalid trace id length", "span without trace id", "traceId is not a hex string"):
        assert f"1 span(s): {words}" in partial["errorMessage"]
    assert sum(r.span_count for r in span_records(kafka, api.topics.spans)) == 1
    assert api.metric("ragmon_api_otlp_spans_rejected_total", {"reason": "trace_id_length"}) == 1


def test_partial_success_in_protobuf(api: RunningApi) -> None:
    tid = new_trace_id()
    spans = [span(tid), span(tid), span(b"\x01" * 8)]
    response = api.http.post(
        "/v1/traces", content=export_of(spans).SerializeToString(), headers={**auth(), **PB}
    )
    assert response.status_code == 200 and response.headers["content-type"] == "application/x-protobuf"
    parsed = ExportTraceServiceResponse.FromString(response.content)
    assert parsed.partial_success.rejected_spans == 1
    assert "invalid trace id length" in parsed.partial_success.error_message


def test_only_invalid_spans_is_400(api: RunningApi, kafka: KafkaReader) -> None:
    response = api.http.post(
        "/v1/traces",
        content=orjson.dumps(json_export([json_span("00" * 16, "ab" * 8)])),
        headers={**auth(), **JS},
    )
    assert response.status_code == 400 and "trace id is all zeros" in response.json()["message"]
    assert response.json()["code"] == 3
    assert kafka.records(api.topics.spans) == []


def test_undecodable_bodies_are_400_in_the_request_encoding(api: RunningApi, kafka: KafkaReader) -> None:
    whole = export_of([span(new_trace_id(), attrs={"input.value": "x" * 200})]).SerializeToString()
    truncated = api.http.post("/v1/traces", content=whole[:-50], headers={**auth(), **PB})
    assert truncated.status_code == 400 and truncated.headers["content-type"] == "application/x-protobuf"
    assert "not a valid ExportTraceServiceRequest" in Status.FromString(truncated.content).message
    for bad in (
        b"{not json",
        b"[1, 2]",
        b'{"resourceSpans": "nope"}',
        b'{"resourceSpans": [{"scopeSpans": 7}]}',
    ):
        response = api.http.post("/v1/traces", content=bad, headers={**auth(), **JS})
        assert response.status_code == 400, bad
        assert response.json()["message"]
    assert kafka.records(api.topics.spans) == []


def test_wrong_content_type_is_415_but_json_never_is(api: RunningApi) -> None:
    for ctype in ("text/plain", "application/xml", ""):
        response = api.http.post("/v1/traces", content=b"{}", headers={**auth(), "Content-Type": ctype})
        assert response.status_code == 415, ctype
        assert "application/x-protobuf or application/json" in response.json()["message"]
    assert api.http.post("/v1/traces", content=b"{}", headers={**auth(), **JS}).status_code == 200


def test_keys_and_tenants(api: RunningApi, kafka: KafkaReader) -> None:
    tid = new_trace_id()
    body = export_of([span(tid)]).SerializeToString()
    missing = api.http.post("/v1/traces", content=body, headers=PB)
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert api.http.post("/v1/traces", content=body, headers={**auth("nope"), **PB}).status_code == 401
    assert api.http.post("/v1/traces", content=body, headers={**auth(READONLY_KEY), **PB}).status_code == 403
    # The same trace id under two keys stays two tenants' data: the tenant comes from the key.
    assert api.http.post("/v1/traces", content=body, headers={**auth(ACME_KEY), **PB}).status_code == 200
    assert api.http.post("/v1/traces", content=body, headers={**auth(GLOBEX_KEY), **PB}).status_code == 200
    records = span_records(kafka, api.topics.spans)
    assert sorted(r.tenant for r in records) == ["acme", "globex"]
    assert len({r.event_id for r in records}) == 2


def test_size_caps_are_413(start_api: Callable[..., RunningApi], redis_client: object) -> None:
    api = start_api(otlp_max_spans_per_request=10)
    ten_mb = "a" * (10 * 1024 * 1024)
    big = export_of([span(new_trace_id(), attrs={"input.value": ten_mb})]).SerializeToString()
    response = api.http.post("/v1/traces", content=big, headers={**auth(), **PB})
    assert response.status_code == 413 and "max_body_bytes" in Status.FromString(response.content).message
    bomb = api.http.post(
        "/v1/traces", content=gzip.compress(big), headers={**auth(), **PB, "Content-Encoding": "gzip"}
    )
    assert bomb.status_code == 413 and "max_decompressed_bytes" in Status.FromString(bomb.content).message
    tid = new_trace_id()
    many = export_of([span(tid) for _ in range(11)]).SerializeToString()
    too_many = api.http.post("/v1/traces", content=many, headers={**auth(), **PB})
    assert too_many.status_code == 413 and "at most 10" in Status.FromString(too_many.content).message


def test_ten_megabyte_attribute_is_truncated_and_reported(
    start_api: Callable[..., RunningApi], redis_client: object, kafka: KafkaReader
) -> None:
    api = start_api(max_body_bytes=1024 * 1024, max_decompressed_bytes=12 * 1024 * 1024)
    big = export_of(
        [span(new_trace_id(), attrs={"output.value": "a" * (10 * 1024 * 1024)})]
    ).SerializeToString()
    response = api.http.post(
        "/v1/traces", content=gzip.compress(big), headers={**auth(), **PB, "Content-Encoding": "gzip"}
    )
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert (
        partial.rejected_spans == 0
        and "1 attribute value(s) truncated to 65536 characters" in partial.error_message
    )
    [record] = span_records(kafka, api.topics.spans)
    assert len(attributes(next(s for _, _, s in record.spans()))["output.value"]) == 65_536
    assert api.metric("ragmon_api_otlp_attribute_values_truncated_total") == 1


def test_rate_limit_counts_spans(start_api: Callable[..., RunningApi], redis_client: object) -> None:
    api = start_api(rate_limit_eps=1, rate_limit_burst=1000, otlp_max_spans_per_request=1000)
    tid = new_trace_id()
    body = export_of([span(tid) for _ in range(600)]).SerializeToString()
    assert api.http.post("/v1/traces", content=body, headers={**auth(), **PB}).status_code == 200
    limited = api.http.post("/v1/traces", content=body, headers={**auth(), **PB})
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert Status.FromString(limited.content).code == 8


def test_broker_unreachable_is_503_with_retry_after(
    start_api: Callable[..., RunningApi], redis_client: object
) -> None:
    from service.local.embedded import free_port

    api = start_api(kafka_bootstrap_servers=f"127.0.0.1:{free_port()}", retry_after_s=3)
    response = api.http.post(
        "/v1/traces", content=export_of([span(new_trace_id())]).SerializeToString(), headers={**auth(), **PB}
    )
    assert response.status_code == 503 and response.headers["retry-after"] == "3"
    assert Status.FromString(response.content).code == 14


def test_trace_of_100k_spans_is_bounded_per_export_and_counted(
    start_api: Callable[..., RunningApi], redis_client: object, kafka: KafkaReader
) -> None:
    api = start_api(max_body_bytes=4 * 1024 * 1024, rate_limit_eps=1e6, rate_limit_burst=200_000)
    tid = new_trace_id()
    spans = [span(tid, name="s") for _ in range(100_000)]
    whole = export_of(spans).SerializeToString()
    refused = api.http.post("/v1/traces", content=whole, headers={**auth(), **PB})
    assert refused.status_code == 413
    for start in range(0, 100_000, 20_000):
        chunk = export_of(spans[start : start + 20_000]).SerializeToString()
        assert api.http.post("/v1/traces", content=chunk, headers={**auth(), **PB}).status_code == 200
    records = span_records(kafka, api.topics.spans)
    # 20,000 spans of one trace encode to more than one record may hold (MAX_RECORD_BYTES): each
    # export's spans are split over records that each fit, and the assembler joins them all.
    assert len(records) >= 5 and sum(r.span_count for r in records) == 100_000
    assert max(len(r.data.SerializeToString()) for r in records) <= MAX_RECORD_BYTES
    assert {r.trace_id for r in records} == {tid.hex()}
    assert api.metric("ragmon_api_otlp_spans_accepted_total", {"tenant": "acme"}) == 100_000
