"""OTLP ingestion and assembly (issue 15's benchmark).

1. Ingest: the simulator's trace events, each also written as the OpenInference trace an
   instrumented app would export (root CHAIN with query and answer, EMBEDDING, RETRIEVER with the
   documents, LLM with model and tokens: 4 spans per trace), so both endpoints carry equal
   content. Alternating in the same run against one `ragmon api --workers 2`: POST /v1/traces
   (protobuf, 100 traces = 400 spans per export) and POST /v1/events (100 trace events per
   batch). Counted: spans (and traces) in requests answered 200 / 202, i.e. acknowledged by Kafka.
2. Assembler: unique traces of the same shape produced straight to a spans topic, then one
   assembler loop (poll, store in Redis, commit, assemble, produce, acknowledge) drains them in
   this process; spans/s and traces/s until every trace event is acknowledged.
Usage: python tests/bench/bench_otlp.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import redis
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from prometheus_client import CollectorRegistry

from service.contracts.kafka import ensure_topics
from service.contracts.spans import decode_span_record, encode_span_record, split_by_trace
from service.local.embedded import free_port, start_broker, start_redis, wait_for_port
from tests.bench.bench_ingest import api_rss_mb, trace_envelopes
from tests.bench.common import (
    ROOT,
    build_request,
    median,
    percentile,
    ragmon_argv,
    run_load,
    spawn,
    write_report,
)
from tests.service.api.otlp_builders import kv
from workers.assembler.__main__ import EMIT_BATCH_BYTES, EMIT_LINGER_MS, build_store
from workers.assembler.assembler import Assembler
from workers.assembler.config import AssemblerConfig
from workers.assembler.metrics import AssemblerMetrics
from workers.assembler.runner import AssemblerLoop
from workers.runtime.emitter import KafkaEmitter
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.settings import WorkerSettings

KEY = "bench-key"
BATCH = 100
SPANS_PER_TRACE = 4
MS = 1_000_000


def _span(trace_id: bytes, parent: bytes, kind: str, name: str, start: int, ms: float,
          attrs: dict[str, Any]) -> Span:
    span = Span(trace_id=trace_id, span_id=os.urandom(8), parent_span_id=parent, name=name,
                start_time_unix_nano=start, end_time_unix_nano=start + int(ms * MS))
    span.attributes.append(kv("openinference.span.kind", kind))
    for key, value in attrs.items():
        if isinstance(value, list):
            item = span.attributes.add(key=key)
            for x in value:
                item.value.array_value.values.add(double_value=float(x))
        elif value is not None:
            span.attributes.append(kv(key, value))
    return span


def openinference_spans(body: dict[str, Any], start: int) -> list[Span]:
    """The spans an instrumented app exports for one native trace body (same content)."""
    tid = os.urandom(16)
    timings, usage, query = body.get("timings", {}), body.get("usage", {}), body["query"]
    meta = {f"ragmon.{k}": body[k] for k in ("variant", "release", "request_id", "intent") if body.get(k)}
    root = _span(tid, b"", "CHAIN", "rag", start, timings.get("total", 500.0), {
        "input.value": query["text"], "output.value": body.get("answer", {}).get("text", ""),
        "session.id": body.get("session_id"), "metadata": json.dumps(meta)})
    retriever: dict[str, Any] = {"input.value": query["text"]}
    for i, doc in enumerate(body.get("retrieval", {}).get("documents", [])):
        retriever[f"retrieval.documents.{i}.document.id"] = doc["id"]
        retriever[f"retrieval.documents.{i}.document.content"] = doc["text"]
        retriever[f"retrieval.documents.{i}.document.score"] = doc.get("score")
        retriever[f"retrieval.documents.{i}.document.metadata"] = json.dumps(doc.get("metadata", {}))
    tokens = usage.get("tokens", {})
    llm = {"llm.model_name": usage.get("model"), "llm.token_count.prompt": tokens.get("prompt"),
           "llm.token_count.completion": tokens.get("completion"), "llm.cost.total": usage.get("cost_usd")}
    embedding = {"embedding.model_name": query.get("embedding_model") or "bench-embedder",
                 "embedding.embeddings.0.embedding.text": query["text"],
                 "embedding.embeddings.0.embedding.vector": query.get("embedding") or [0.1, 0.2, 0.3]}
    return [root,
            _span(tid, root.span_id, "EMBEDDING", "embed", start + MS, timings.get("embedding", 5.0), embedding),
            _span(tid, root.span_id, "RETRIEVER", "retrieve", start + 10 * MS, timings.get("retrieval", 30.0),
                  retriever),
            _span(tid, root.span_id, "LLM", "llm", start + 50 * MS, timings.get("generation", 400.0), llm)]


def wait_ready(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=10).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} not ready within {timeout_s:.0f}s")


def export_of(traces: list[list[Span]]) -> bytes:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(kv("service.name", "bench-app"))
    scope = rs.scope_spans.add()
    for spans in traces:
        scope.spans.extend(spans)
    return request.SerializeToString()


def ingest(args: argparse.Namespace, envelopes: list[dict[str, Any]], broker_port: int,
           redis_port: int) -> tuple[list[tuple[Any, ...]], float]:
    start = time.time_ns() - 60_000 * MS
    traces = [openinference_spans(e["body"], start) for e in envelopes]
    otlp_bodies = [export_of(traces[i:i + BATCH]) for i in range(0, len(traces), BATCH)]
    native_bodies = [orjson.dumps({"events": envelopes[i:i + BATCH]}) for i in range(0, len(envelopes), BATCH)]
    port = free_port()
    env = {"RAGMON_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{broker_port}",
           "RAGMON_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "RAGMON_DEV_API_KEY": KEY,
           "RAGMON_DEV_TENANT": "bench", "RAGMON_RATE_LIMIT_EPS": "10000000", "RAGMON_RATE_LIMIT_BURST": "20000000"}
    api = spawn(ragmon_argv("api", "--port", str(port), "--log-level", "warning", "--workers",
                            str(args.api_workers)), env, ROOT / "tests" / "bench" / ".work" / "api-otlp.log")
    rows = []
    try:
        wait_for_port("127.0.0.1", port, 30, api)
        wait_ready(f"http://127.0.0.1:{port}/readyz")
        auth = {"Authorization": f"Bearer {KEY}"}
        otlp = [build_request("127.0.0.1", port, "/v1/traces", b, {**auth, "Content-Type": "application/x-protobuf"})
                for b in otlp_bodies]
        native = [build_request("127.0.0.1", port, "/v1/events", b, {**auth, "Content-Type": "application/json"})
                  for b in native_bodies]
        for rep in range(args.repeats):
            spans = run_load("127.0.0.1", port, otlp, BATCH * SPANS_PER_TRACE, args.clients, warmup_s=3,
                             measure_s=args.seconds, ok_status=200)
            events = run_load("127.0.0.1", port, native, BATCH, args.clients, warmup_s=3, measure_s=args.seconds)
            rows.append((spans.events_per_s, percentile(spans.latencies_s, 99) * 1000, events.events_per_s,
                         percentile(events.latencies_s, 99) * 1000, dict(spans.statuses), dict(events.statuses)))
            print(f"ingest run {rep}: {rows[-1]}", flush=True)
        rss = api_rss_mb(api.pid)
    finally:
        api.terminate()
        api.wait(15)
    return rows, rss


def assembler_run(args: argparse.Namespace, envelopes: list[dict[str, Any]], broker_port: int,
                  redis_port: int, rep: int) -> tuple[float, float, float, float]:
    """(spans/s, traces/s, seconds, plain read spans/s) of one assembler loop draining unique traces."""
    settings = WorkerSettings(kafka_bootstrap_servers=f"127.0.0.1:{broker_port}",
                              redis_url=f"redis://127.0.0.1:{redis_port}/0", kafka_topic_prefix=f"asm{rep}",
                              kafka_partitions=4, worker_max_batch=500, worker_poll_timeout_ms=100)
    ensure_topics(settings)
    client = redis.Redis.from_url(settings.redis_url)
    client.flushdb()
    config = AssemblerConfig(quiet_period_s=0, max_traces_per_tick=1000)
    registry = CollectorRegistry()
    emitter = KafkaEmitter(settings, client_id="bench-assembler", linger_ms=EMIT_LINGER_MS,
                           batch_size=EMIT_BATCH_BYTES)
    assembler = Assembler(config, build_store(client, config), emitter, settings.topics, AssemblerMetrics(registry))
    loop = AssemblerLoop(assembler, settings, RuntimeMetrics(registry, "assembler"))
    while not loop.consumer.assignment():  # joining the group is start-up, not throughput
        loop.step()
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_list, acks="all", compression_type="lz4",
                             linger_ms=5, batch_size=512 * 1024)
    start = time.time_ns() - 60_000 * MS
    for i in range(args.assembler_traces):
        spans = openinference_spans(envelopes[i % len(envelopes)]["body"], start)
        data = split_by_trace([_resource_spans(spans)])[spans[0].trace_id]
        key, value, headers = encode_span_record("bench", spans[0].trace_id.hex(), data)
        producer.send(settings.topics.spans, key=key, value=value, headers=headers)
    producer.flush()
    producer.close()
    started = time.perf_counter()
    emitted = 0.0
    while emitted < args.assembler_traces and time.perf_counter() - started < 120:
        loop.step()
        emitted = registry.get_sample_value("ragmon_assembler_traces_emitted_total", {"tenant": "bench"}) or 0.0
    elapsed = time.perf_counter() - started
    stored = registry.get_sample_value("ragmon_assembler_spans_total", {"outcome": "stored"}) or 0.0
    loop.consumer.close()
    emitter.close()
    client.close()
    return stored / elapsed, emitted / elapsed, elapsed, plain_read_spans_per_s(settings)


def plain_read_spans_per_s(settings: WorkerSettings) -> float:
    """Reference in the same run: a kafka-python consumer reading and decoding the same spans records, nothing else."""
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_list, enable_auto_commit=False,
                             auto_offset_reset="earliest", max_poll_records=500)
    tps = [TopicPartition(settings.topics.spans, p) for p in consumer.partitions_for_topic(settings.topics.spans)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    end = consumer.end_offsets(tps)
    spans = 0
    started = time.perf_counter()
    while any(consumer.position(tp) < end[tp] for tp in tps):
        for batch in consumer.poll(timeout_ms=200).values():
            spans += sum(decode_span_record(r.value, r.headers).span_count for r in batch)
    elapsed = time.perf_counter() - started
    consumer.close()
    return spans / elapsed


def _resource_spans(spans: list[Span]) -> Any:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(kv("service.name", "bench-app"))
    rs.scope_spans.add().spans.extend(spans)
    return rs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--api-workers", type=int, default=2)
    ap.add_argument("--assembler-traces", type=int, default=5000)
    args = ap.parse_args()
    envelopes = trace_envelopes(2000)
    for e in envelopes:  # inside the API's accepted time window whatever the run's length
        e["timestamp"] = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    broker, store = start_broker(), start_redis()
    try:
        rows, rss = ingest(args, envelopes, broker.port, store.port)
        assembly = [assembler_run(args, envelopes, broker.port, store.port, rep) for rep in range(args.repeats)]
    finally:
        store.stop()
        broker.stop()
    write_report("otlp", "OTLP ingestion and assembler benchmark", report(args, rows, rss, assembly), args.out)
    return 0


def report(args: argparse.Namespace, rows: list[tuple[Any, ...]], rss: float,
           assembly: list[tuple[float, float, float, float]]) -> str:
    spans_s, events_s = median([r[0] for r in rows]), median([r[2] for r in rows])
    table = "\n".join(
        f"| {i + 1} | {r[0]:,.0f} | {r[0] / SPANS_PER_TRACE:,.0f} | {r[1]:.1f} | {r[2]:,.0f} | {r[3]:.1f} | "
        f"{r[0] / SPANS_PER_TRACE / r[2]:.2f} | {r[4]} {r[5]} |" for i, r in enumerate(rows))
    asm = "\n".join(f"| {i + 1} | {a[0]:,.0f} | {a[1]:,.0f} | {a[2]:.1f} | {a[3]:,.0f} | {a[0] / a[3]:.2f} |"
                    for i, a in enumerate(assembly))
    asm_spans, plain = median([a[0] for a in assembly]), median([a[3] for a in assembly])
    return f"""Equal content: each of the simulator's `clean` trace events is also written as the OpenInference trace
an instrumented app exports ({SPANS_PER_TRACE} spans: CHAIN root with query and answer, EMBEDDING, RETRIEVER with the
documents, LLM with model, tokens and cost). One `ragmon api --workers {args.api_workers}`, {args.clients} keep-alive
clients on 127.0.0.1, {args.seconds:.0f} s measured after a 3 s warm-up, OTLP and native alternating in each of
{args.repeats} repetitions; a memory-only Tansu broker and the load client on the same machine. Counted: what was in
requests answered 200 (OTLP, protobuf, {BATCH} traces = {BATCH * SPANS_PER_TRACE} spans per export) or 202 (native,
{BATCH} trace events per batch): durable in Kafka (acks=all).

| run | OTLP spans/s | OTLP traces/s | OTLP p99 ms/export | native events/s | native p99 ms/batch | OTLP traces / native events | statuses |
|---|---|---|---|---|---|---|---|
{table}

**Medians:** OTLP {spans_s:,.0f} spans/s acknowledged (target ≥ 5,000) = {spans_s / SPANS_PER_TRACE:,.0f} traces/s,
against {events_s:,.0f} native trace events/s in the same run (ratio
{spans_s / SPANS_PER_TRACE / events_s:.2f} at equal content). API peak RSS (all processes): {rss:.0f} MB.
Phoenix's own receiver is not measured here (see the Phoenix side of issue 15).

Assembler: {args.assembler_traces} unique traces ({args.assembler_traces * SPANS_PER_TRACE} spans, one spans record
per trace) produced to a fresh spans topic once the loop had joined its consumer group, then one assembler loop in
one process (poll, idempotent store in Redis,
commit, claim, assemble, produce the trace events, wait for acks, close the state) until every trace event is
acknowledged; quiet period 0. Reference in the same run: a plain kafka-python consumer reading and decoding the
same records (no Redis, no assembly, no producing).

| run | spans/s | trace events/s | seconds | plain read spans/s | assembler / plain read |
|---|---|---|---|---|---|
{asm}

**Median:** {asm_spans:,.0f} spans/s per assembler process (target ≥ 5,000); the plain read reaches {plain:,.0f}
spans/s on the same records. Load average at the end of the run (other work shares this machine):
{" / ".join(f"{x:.1f}" for x in os.getloadavg())} (1 / 5 / 15 min).
"""


if __name__ == "__main__":
    raise SystemExit(main())
