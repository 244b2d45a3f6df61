"""OTLP ingestion and assembly (issue 15's benchmark).

1. Ingest: the simulator's trace events, each also written as the OpenInference trace an
   instrumented app would export (root CHAIN with query and answer, EMBEDDING, RETRIEVER with the
   documents, LLM with model and tokens: 4 spans per trace), so both endpoints carry equal
   content. Alternating in the same run against one `ragmon api --workers 2`: POST /v1/traces
   (protobuf, 100 traces = 400 spans per export) and POST /v1/events (100 trace events per
   batch). Counted: spans (and traces) in requests answered 200 / 202, i.e. acknowledged by Kafka.
2. Phoenix: the same kind of exports (fresh ids), each sent once by the same clients to ragmon's
   /v1/traces and then to a fresh `phoenix serve` (tests/support/phoenix.py: its own venv, temp
   working dir, free ports, stopped by PID); Phoenix's durable rate is read back from its database
   through its GraphQL API (span count) until every acknowledged span is stored.
3. Assembler: unique traces of the same shape preloaded into a spans topic; one assembler process
   per run (tests/bench/assembler_runner.py: the real loop, timed by stage) drains them until every
   trace event is acknowledged; with --reference REV the same runner on that revision's tree takes
   turns with the change in each repeat.
Usage: python tests/bench/bench_otlp.py [--reference REV] [--parts ingest,phoenix,assembler] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import redis
import yaml
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from service.contracts.kafka import ensure_topics
from service.contracts.settings import CommonSettings
from service.contracts.spans import decode_span_record, encode_span_record, split_by_trace
from service.contracts.topics import Topics
from service.local.embedded import free_port, start_broker, start_redis, wait_for_port
from tests.bench import e2e
from tests.bench.assembler_runner import BLOCK_HIREDIS
from tests.bench.bench_ingest import api_rss_mb, trace_envelopes
from tests.bench.common import (
    REPORTS,
    ROOT,
    build_request,
    child_report,
    median,
    peak_rss_mb,
    percentile,
    ragmon_argv,
    read_response,
    run_load,
    spawn,
    write_report,
)
from tests.service.api.otlp_builders import kv
from tests.support.phoenix import VENV as PHOENIX_VENV
from tests.support.phoenix import PhoenixServer, ensure_venv
from tests.workers.assembler.oi_spans import oi_span

KEY = "bench-key"
BATCH = 100
SPANS_PER_TRACE = 4
MS = 1_000_000
WORK = ROOT / "tests" / "bench" / ".work"
RUNNER = ROOT / "tests" / "bench" / "assembler_runner.py"
KEPT_NOTE = "(The sections above are from the previous full run"
ASM_HEADING = "## Assembler: one process, spans topic -> trace events"
ASM_STAGES = ("fetch", "decode", "store", "commit", "claim", "load", "assemble", "ack", "finish")


def _span(
    trace_id: bytes, parent: bytes, kind: str, name: str, start: int, ms: float, attrs: dict[str, Any]
) -> Span:
    """An OpenInference span; an attribute the body has no value for is left out."""
    return oi_span(trace_id, kind, name, start, ms, parent, {k: v for k, v in attrs.items() if v is not None})


def openinference_spans(body: dict[str, Any], start: int) -> list[Span]:
    """The spans an instrumented app exports for one native trace body (same content)."""
    tid = os.urandom(16)
    timings, usage, query = body.get("timings", {}), body.get("usage", {}), body["query"]
    meta = {f"ragmon.{k}": body[k] for k in ("variant", "release", "request_id", "intent") if body.get(k)}
    root = _span(
        tid,
        b"",
        "CHAIN",
        "rag",
        start,
        timings.get("total", 500.0),
        {
            "input.value": query["text"],
            "output.value": body.get("answer", {}).get("text", ""),
            "session.id": body.get("session_id"),
            "metadata": json.dumps(meta),
        },
    )
    retriever: dict[str, Any] = {"input.value": query["text"]}
    for i, doc in enumerate(body.get("retrieval", {}).get("documents", [])):
        retriever[f"retrieval.documents.{i}.document.id"] = doc["id"]
        retriever[f"retrieval.documents.{i}.document.content"] = doc["text"]
        retriever[f"retrieval.documents.{i}.document.score"] = doc.get("score")
        retriever[f"retrieval.documents.{i}.document.metadata"] = json.dumps(doc.get("metadata", {}))
    tokens = usage.get("tokens", {})
    llm = {
        "llm.model_name": usage.get("model"),
        "llm.token_count.prompt": tokens.get("prompt"),
        "llm.token_count.completion": tokens.get("completion"),
        "llm.cost.total": usage.get("cost_usd"),
    }
    embedding = {
        "embedding.model_name": query.get("embedding_model") or "bench-embedder",
        "embedding.embeddings.0.embedding.text": query["text"],
        "embedding.embeddings.0.embedding.vector": query.get("embedding") or [0.1, 0.2, 0.3],
    }
    return [
        root,
        _span(tid, root.span_id, "EMBEDDING", "embed", start + MS, timings.get("embedding", 5.0), embedding),
        _span(
            tid,
            root.span_id,
            "RETRIEVER",
            "retrieve",
            start + 10 * MS,
            timings.get("retrieval", 30.0),
            retriever,
        ),
        _span(tid, root.span_id, "LLM", "llm", start + 50 * MS, timings.get("generation", 400.0), llm),
    ]


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


def ingest(
    args: argparse.Namespace,
    envelopes: list[dict[str, Any]],
    broker_port: int,
    redis_port: int,
    phoenix_bodies: list[bytes],
    rows_once: list[tuple[int, float, dict[int, int]]],
) -> tuple[list[tuple[Any, ...]], float]:
    start = time.time_ns() - 60_000 * MS
    traces = [openinference_spans(e["body"], start) for e in envelopes]
    otlp_bodies = [export_of(traces[i : i + BATCH]) for i in range(0, len(traces), BATCH)]
    native_bodies = [
        orjson.dumps({"events": envelopes[i : i + BATCH]}) for i in range(0, len(envelopes), BATCH)
    ]
    port = free_port()
    env = {
        "RAGMON_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{broker_port}",
        "RAGMON_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "RAGMON_DEV_API_KEY": KEY,
        "RAGMON_DEV_TENANT": "bench",
        "RAGMON_RATE_LIMIT_EPS": "10000000",
        "RAGMON_RATE_LIMIT_BURST": "20000000",
    }
    api = spawn(
        ragmon_argv("api", "--port", str(port), "--log-level", "warning", "--workers", str(args.api_workers)),
        env,
        ROOT / "tests" / "bench" / ".work" / "api-otlp.log",
    )
    rows = []
    try:
        wait_for_port("127.0.0.1", port, 30, api)
        wait_ready(f"http://127.0.0.1:{port}/readyz")
        auth = {"Authorization": f"Bearer {KEY}"}
        otlp = [
            build_request(
                "127.0.0.1", port, "/v1/traces", b, {**auth, "Content-Type": "application/x-protobuf"}
            )
            for b in otlp_bodies
        ]
        native = [
            build_request("127.0.0.1", port, "/v1/events", b, {**auth, "Content-Type": "application/json"})
            for b in native_bodies
        ]
        for rep in range(args.repeats):
            spans = run_load(
                "127.0.0.1",
                port,
                otlp,
                BATCH * SPANS_PER_TRACE,
                args.clients,
                warmup_s=3,
                measure_s=args.seconds,
                ok_status=200,
            )
            events = run_load(
                "127.0.0.1", port, native, BATCH, args.clients, warmup_s=3, measure_s=args.seconds
            )
            rows.append(
                (
                    spans.events_per_s,
                    percentile(spans.latencies_s, 99) * 1000,
                    events.events_per_s,
                    percentile(events.latencies_s, 99) * 1000,
                    dict(spans.statuses),
                    dict(events.statuses),
                )
            )
            print(f"ingest run {rep}: {rows[-1]}", flush=True)
        rss = api_rss_mb(api.pid)
        if phoenix_bodies:
            once = [
                build_request(
                    "127.0.0.1", port, "/v1/traces", b, {**auth, "Content-Type": "application/x-protobuf"}
                )
                for b in phoenix_bodies
            ]
            statuses, seconds = send_once("127.0.0.1", port, once, args.clients)
            rows_once.append((statuses.get(200, 0) * BATCH * SPANS_PER_TRACE, seconds, statuses))
    finally:
        api.terminate()
        api.wait(15)
    return rows, rss


async def _send_each(host: str, port: int, queue: list[bytes], statuses: dict[int, int]) -> None:
    """One keep-alive connection taking requests off a shared queue (the load client's HTTP/1.1 exchange)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while queue:
            writer.write(queue.pop())
            status = await read_response(reader)
            statuses[status] = statuses.get(status, 0) + 1
    finally:
        writer.close()


def send_once(host: str, port: int, requests: list[bytes], clients: int) -> tuple[dict[int, int], float]:
    """Every request exactly once over `clients` keep-alive connections: (statuses, seconds)."""
    queue = list(reversed(requests))
    statuses: dict[int, int] = {}

    async def main() -> None:
        await asyncio.gather(*[_send_each(host, port, queue, statuses) for _ in range(clients)])

    started = time.perf_counter()
    asyncio.run(main())
    return statuses, time.perf_counter() - started


def phoenix_span_count(px: PhoenixServer) -> int:
    """Spans in Phoenix's database, every project, through its GraphQL API (a SQL count, not the queue)."""
    answer = httpx.post(
        f"{px.base_url}/graphql",
        headers=px.headers,
        timeout=30,
        json={"query": "query { projects { edges { node { recordCount } } } }"},
    )
    answer.raise_for_status()
    return sum(e["node"]["recordCount"] for e in answer.json()["data"]["projects"]["edges"])


def phoenix_ingest(args: argparse.Namespace, bodies: list[bytes]) -> dict[str, Any]:
    """The same exports to a fresh `phoenix serve` (its own venv, temp dir, free ports, stopped by PID):
    acknowledged rate, then its database's span count polled until every acknowledged span is there (or
    no progress for --phoenix-settle s): durable spans over the time from the first request to the last one stored."""
    command = ensure_venv()
    version = (
        subprocess.run(
            [str(PHOENIX_VENV / "bin" / "python"), "-c", "import phoenix; print(phoenix.__version__)"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or "?"
    )
    WORK.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-phoenix-", dir=WORK) as work:
        px = PhoenixServer(log_dir=WORK, working_dir=Path(work))
        px.start(command)
        try:
            headers = {**px.headers, "Content-Type": "application/x-protobuf"}
            requests = [build_request("127.0.0.1", px.http_port, "/v1/traces", b, headers) for b in bodies]
            started = time.perf_counter()
            statuses, ack_seconds = send_once("127.0.0.1", px.http_port, requests, args.clients)
            acked = statuses.get(200, 0) * BATCH * SPANS_PER_TRACE
            count, last_change, last_count = 0, time.perf_counter(), -1
            while count < acked and time.perf_counter() - last_change < args.phoenix_settle:
                count = phoenix_span_count(px)
                if count != last_count:
                    last_change, last_count = time.perf_counter(), count
                time.sleep(0.5)
            durable_seconds = last_change - started
            rss = peak_rss_mb(px.proc.pid) if px.proc else float("nan")
        finally:
            px.stop()
    return {
        "version": version,
        "acked": acked,
        "ack_seconds": ack_seconds,
        "statuses": statuses,
        "durable": count,
        "durable_seconds": durable_seconds,
        "rss": rss,
    }


def preload_spans(
    args: argparse.Namespace, envelopes: list[dict[str, Any]], bootstrap: str, prefix: str
) -> None:
    """Unique traces of the ingest's shape, one spans record per trace, as the API produces them."""
    settings = CommonSettings(
        kafka_bootstrap_servers=bootstrap, kafka_topic_prefix=prefix, kafka_partitions=4
    )
    ensure_topics(settings)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", compression_type="lz4", linger_ms=5, batch_size=512 * 1024
    )
    start = time.time_ns() - 60_000 * MS
    for i in range(args.assembler_traces):
        spans = openinference_spans(envelopes[i % len(envelopes)]["body"], start)
        data = split_by_trace([_resource_spans(spans)])[spans[0].trace_id]
        key, value, headers = encode_span_record("bench", spans[0].trace_id.hex(), data)
        producer.send(settings.topics.spans, key=key, value=value, headers=headers)
    producer.flush()
    producer.close()


def assembler_runs(
    args: argparse.Namespace, envelopes: list[dict[str, Any]], broker_port: int, redis_port: int
) -> dict[str, list[dict[str, Any]]]:
    """{"change": runs, "reference": runs[, "plain_read": runs]}: one assembler process per run
    (tests/bench/assembler_runner.py) draining the same preloaded records from the start under a fresh consumer
    group and an empty Redis; the change and the reference tree take turns within each repeat."""
    trees = {"change": ROOT} | ({"reference": e2e.reference_tree(args.reference)} if args.reference else {})
    bootstrap, redis_url = f"127.0.0.1:{broker_port}", f"redis://127.0.0.1:{redis_port}/0"
    prefix = f"asm{uuid.uuid4().hex[:6]}"
    preload_spans(args, envelopes, bootstrap, prefix)
    WORK.mkdir(parents=True, exist_ok=True)
    config = WORK / f"assembler-{prefix}.yaml"
    config.write_text(yaml.safe_dump({"assembler": {"quiet_period_s": 0, "max_traces_per_tick": 1000}}))
    env = {
        **os.environ,
        "RAGMON_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "RAGMON_KAFKA_TOPIC_PREFIX": prefix,
        "RAGMON_REDIS_URL": redis_url,
        "RAGMON_CONFIG": str(config),
        "RAGMON_WORKER_MAX_BATCH": "500",
        "RAGMON_WORKER_POLL_TIMEOUT_MS": "100",
        "RAGMON_KAFKA_PARTITIONS": "4",
    }
    runs: dict[str, list[dict[str, Any]]] = {path: [] for path in trees} | {"plain_read": []}
    try:
        for rep in range(args.repeats):
            for path, tree in trees.items():
                redis.Redis.from_url(redis_url).flushdb()  # the previous run's state and done markers
                block = {BLOCK_HIREDIS: "1"} if not depends_on_hiredis(tree) else {}
                run = child_report(
                    [sys.executable, str(RUNNER), "--count", str(args.assembler_traces)],
                    tree,
                    {
                        **env,
                        "PYTHONPATH": str(tree),
                        **block,
                        "RAGMON_WORKER_GROUP_ID": f"bench-{uuid.uuid4().hex[:8]}",
                    },
                    600,
                    "assembler",
                )
                if run["traces"] < args.assembler_traces:
                    raise RuntimeError(f"{path}: {run['traces']:.0f} of {args.assembler_traces} trace events")
                runs[path].append(run)
                print(
                    f"assembler run {rep} {path}: {run['spans'] / run['wall']['end_to_end']:,.0f} spans/s wall, "
                    f"{run['spans'] / run['cpu']['end_to_end_process']:,.0f} per CPU-second",
                    flush=True,
                )
            runs["plain_read"].append({"spans_per_s": plain_read_spans_per_s(bootstrap, prefix)})
    finally:
        config.unlink(missing_ok=True)
    return runs


def depends_on_hiredis(tree: Path) -> bool:
    """Whether the tree's project lists hiredis (redis-py's C parser): a reference from before it runs without it,
    as it was deployed, although the shared environment has it installed."""
    project = tree / "pyproject.toml"
    return project.is_file() and '"hiredis' in project.read_text()


def plain_read_spans_per_s(bootstrap: str, prefix: str) -> float:
    """A floor in the same run: a kafka-python consumer reading and decoding the same spans records, nothing else."""
    topic = Topics(prefix).spans
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=500,
    )
    tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
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
    ap.add_argument(
        "--reference", default=None, help="git revision whose assembler is measured as the reference"
    )
    ap.add_argument(
        "--parts",
        default="ingest,phoenix,assembler",
        help="comma-separated: ingest, phoenix (needs ingest), assembler",
    )
    ap.add_argument(
        "--phoenix-exports", type=int, default=10, help="unique exports sent once to each receiver"
    )
    ap.add_argument(
        "--phoenix-settle",
        type=float,
        default=30.0,
        help="stop waiting for Phoenix's database after this long without a new span",
    )
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    envelopes = trace_envelopes(2000)
    for e in envelopes:  # inside the API's accepted time window whatever the run's length
        e["timestamp"] = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    broker, store = start_broker(), start_redis()
    body = ""
    try:
        if "ingest" in parts:
            phoenix_bodies = phoenix_exports(args, envelopes) if "phoenix" in parts else []
            rows_once: list[tuple[int, float, dict[int, int]]] = []
            rows, rss = ingest(args, envelopes, broker.port, store.port, phoenix_bodies, rows_once)
            body += ingest_report(args, rows, rss)
            if phoenix_bodies:
                body += phoenix_report(args, rows_once[0], phoenix_ingest(args, phoenix_bodies))
        if "assembler" in parts:
            body += assembler_report(args, assembler_runs(args, envelopes, broker.port, store.port))
    finally:
        store.stop()
        broker.stop()
    body += (
        f"\nLoad average at the end of the run (other work shares this 2-core machine): "
        f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} (1 / 5 / 15 min).\n"
    )
    if parts == {"assembler"}:
        body = keep_other_sections(body, Path(args.out) if args.out else REPORTS / "otlp.md")
    write_report("otlp", "OTLP ingestion and assembler benchmark", body, args.out)
    return 0


def keep_other_sections(assembler_body: str, report: Path) -> str:
    """With only the assembler part run: the report's other sections as they were, this run's assembler section."""
    if not report.is_file() or ASM_HEADING not in report.read_text():
        return assembler_body
    old = report.read_text()
    machine = next((line for line in old.splitlines() if line.startswith("_Machine:")), "_Machine: unknown._")
    before = old[old.index("\n\n", old.index("_Machine:")) + 2 : old.index(ASM_HEADING)].rstrip().splitlines()
    notes = [line for line in before if line.startswith(KEPT_NOTE)]  # an earlier assembler-only run's: kept
    note = (
        notes[0]
        if notes
        else (
            f"{KEPT_NOTE}, {machine.strip('_.')[len('Machine: ') :]}; the assembler section "
            "below was re-measured alone with `--parts assembler`; the machine line at the "
            "top is that run's.)"
        )
    )
    kept = "\n".join(line for line in before if not line.startswith(KEPT_NOTE)).rstrip()
    return f"{kept}\n\n{note}\n{assembler_body}"


def ingest_report(args: argparse.Namespace, rows: list[tuple[Any, ...]], rss: float) -> str:
    spans_s, events_s = median([r[0] for r in rows]), median([r[2] for r in rows])
    table = "\n".join(
        f"| {i + 1} | {r[0]:,.0f} | {r[0] / SPANS_PER_TRACE:,.0f} | {r[1]:.1f} | {r[2]:,.0f} | {r[3]:.1f} | "
        f"{r[0] / SPANS_PER_TRACE / r[2]:.2f} | {r[4]} {r[5]} |"
        for i, r in enumerate(rows)
    )
    return f"""## Ingest: POST /v1/traces against POST /v1/events

Equal content: each of the simulator's `clean` trace events is also written as the OpenInference trace
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
"""


def phoenix_exports(args: argparse.Namespace, envelopes: list[dict[str, Any]]) -> list[bytes]:
    """Exports of the ingest's shape with ids of their own (Phoenix ignores a span id it already has)."""
    start = time.time_ns() - 60_000 * MS
    traces = [
        openinference_spans(envelopes[i % len(envelopes)]["body"], start)
        for i in range(args.phoenix_exports * BATCH)
    ]
    return [export_of(traces[i : i + BATCH]) for i in range(0, len(traces), BATCH)]


def phoenix_report(
    args: argparse.Namespace, ours: tuple[int, float, dict[int, int]], px: dict[str, Any]
) -> str:
    ours_rate = ours[0] / ours[1]
    px_ack = px["acked"] / px["ack_seconds"]
    px_durable = px["durable"] / px["durable_seconds"] if px["durable_seconds"] > 0 else float("nan")
    complete = (
        "every acknowledged span"
        if px["durable"] >= px["acked"]
        else f"only {px['durable']:,} of {px['acked']:,} acknowledged spans (no new span for "
        f"{args.phoenix_settle:.0f} s)"
    )
    return f"""
## Ingest against Phoenix's own receiver (same run, same exports, same clients)

{args.phoenix_exports} unique protobuf exports ({args.phoenix_exports * BATCH * SPANS_PER_TRACE:,} spans, fresh ids)
sent once each over {args.clients} keep-alive connections, first to ragmon's `/v1/traces` (the API above: a 200
means durable in Kafka, acks=all), then, with ragmon's API stopped, to a fresh `phoenix serve` (Phoenix
{px["version"]}, SQLite in a temp dir, auth on, Bearer key) on its `/v1/traces`. Phoenix answers 200 once the spans
are in its in-memory insert queue; they are durable once in its database, read back through its GraphQL API
(`recordCount` of every project, a SQL count) every 0.5 s: Phoenix's durable rate is the spans stored over the time
from the first request to the last span stored. Phoenix stored {complete}.

| receiver | spans acknowledged/s | spans durable/s | durable spans | seconds to durable | statuses |
|---|---:|---:|---:|---:|---|
| ragmon `/v1/traces` (durable when acknowledged) | {ours_rate:,.0f} | {ours_rate:,.0f} | {ours[0]:,} | {ours[1]:.1f} | {ours[2]} |
| Phoenix `/v1/traces` | {px_ack:,.0f} | {px_durable:,.1f} | {px["durable"]:,} | {px["durable_seconds"]:.1f} | {px["statuses"]} |

**ragmon / Phoenix, durable spans/s: {ours_rate / px_durable:,.1f}×** (acknowledged: {ours_rate / px_ack:.2f}×).
Phoenix peak RSS: {px["rss"]:.0f} MB.
"""


def _asm_summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    out = {
        "wall": median([r["spans"] / r["wall"]["end_to_end"] for r in runs]),
        "cpu": median([r["spans"] / r["cpu"]["end_to_end_process"] for r in runs]),
        "traces": median([r["traces"] / r["wall"]["end_to_end"] for r in runs]),
        "seconds": median([r["wall"]["end_to_end"] for r in runs]),
        "rss": max(r["peak_rss_mb"] for r in runs),
    }
    for clock in ("wall", "cpu"):
        for stage in (*ASM_STAGES, "end_to_end"):
            out[f"{clock}:{stage}"] = median([r[clock][stage] / r["spans"] * 1e6 for r in runs])
        out[f"{clock}:rest"] = out[f"{clock}:end_to_end"] - sum(out[f"{clock}:{s}"] for s in ASM_STAGES)
    out["cpu:process"] = median([r["cpu"]["end_to_end_process"] / r["spans"] * 1e6 for r in runs])
    out["cpu:threads"] = out["cpu:process"] - out["cpu:end_to_end"]
    return out


ASM_LABELS = {
    "fetch": "fetch (poll the spans topic)",
    "decode": "decode (TracesData protobuf)",
    "store": "store (spans into Redis, idempotent)",
    "commit": "commit (offsets)",
    "claim": "claim due traces",
    "load": "load their spans from Redis",
    "assemble": "assemble (mapping, trace event, produce)",
    "ack": "wait for acks",
    "finish": "close the state (late spans counted)",
    "rest": "loop bookkeeping (metrics, lag)",
    "end_to_end": "**end to end, main thread**",
    "threads": "Kafka clients' background threads (CPU only)",
    "process": "**end to end, process**",
}


def assembler_report(args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]]) -> str:
    paths = [p for p in ("change", "reference") if p in runs]
    res = {p: _asm_summary(runs[p]) for p in paths}
    plain = median([r["spans_per_s"] for r in runs["plain_read"]])
    head = "\n".join(
        f"| {p} | {r['wall']:,.0f} | {r['cpu']:,.0f} | {r['traces']:,.0f} | {r['seconds']:.2f} | "
        f"{r['rss']:,.0f} |"
        for p, r in res.items()
    )
    raw = "; ".join(
        f"{p}: " + ", ".join(f"{r['spans'] / r['wall']['end_to_end']:,.0f}" for r in runs[p]) for p in paths
    )
    prof = [
        f"| stage | {' | '.join(f'{p}: µs/span CPU (wall)' for p in paths)} |",
        "|---|" + "---:|" * len(paths),
    ]
    for stage in (*ASM_STAGES, "rest", "end_to_end", "threads", "process"):
        cells = [
            f"{res[p]['cpu:' + stage]:,.1f}"
            + (f" ({res[p]['wall:' + stage]:,.1f})" if "wall:" + stage in res[p] else "")
            for p in paths
        ]
        prof.append(f"| {ASM_LABELS[stage]} | {' | '.join(cells)} |")
    change = res["change"]
    verdict = "meets" if change["wall"] >= 5000 else "MISSES"
    if "reference" in res:
        ref = res["reference"]
        ratio = (
            f"Change / reference, same run: **{change['wall'] / ref['wall']:.2f}×** spans/s on the wall clock, "
            f"{change['cpu'] / ref['cpu']:.2f}× per CPU-second."
        )
    else:
        ratio = "No reference measured (pass --reference REV)."
    prof_table = "\n".join(prof)
    raw_cpu = "; ".join(
        f"{p}: " + ", ".join(f"{r['spans'] / r['cpu']['end_to_end_process']:,.0f}" for r in runs[p])
        for p in paths
    )
    pairs = ""
    if "reference" in runs:  # the two paths of one repeat ran back to back, under about the same load
        ratios = [
            (c["spans"] / c["cpu"]["end_to_end_process"]) / (r["spans"] / r["cpu"]["end_to_end_process"])
            for c, r in zip(runs["change"], runs["reference"], strict=True)
        ]
        pairs = (
            f"; change / reference per repeat: {', '.join(f'{x:.2f}' for x in ratios)}× "
            f"(median {median(ratios):.2f}×)"
        )
    parts = "" if args.parts == "ingest,phoenix,assembler" else f" --parts {args.parts}"
    parsers = ", ".join(
        f"{p}: "
        + (
            "hiredis (C)"
            if all(r.get("hiredis") for r in runs[p])
            else "redis-py's Python parser (its revision does not depend on hiredis)"
        )
        for p in paths
    )
    return f"""
{ASM_HEADING}

`python tests/bench/bench_otlp.py --reference {args.reference}{parts}` — {args.assembler_traces:,} unique traces
({args.assembler_traces * SPANS_PER_TRACE:,} spans, one spans record per trace, as the API writes them) preloaded into
a 4-partition spans topic of a private Tansu broker; each run is one process (tests/bench/assembler_runner.py)
running the real loop (poll, decode, idempotent store in Redis, commit, claim, load, assemble, produce the trace
events, wait for acks, close the state) from the first records fetched until every trace event is acknowledged;
quiet period 0, batches of up to 500 records, an empty Redis and a fresh consumer group per run. The change and the
reference (`{args.reference}`) take turns within each of {args.repeats} repeats; medians. Per CPU-second: the
spans over the process's CPU time (every thread), i.e. what one process sustains on a core of its own.

| path | spans/s, wall | spans/s per CPU-second | trace events/s, wall | seconds | peak RSS MiB |
|---|---:|---:|---:|---:|---:|
{head}

Target ≥ 5,000 spans/s per process on the wall clock of this loaded machine: **{verdict}**
({change["wall"] / 5000:.1f}× the target; {change["cpu"] / 5000:.1f}× per CPU-second). {ratio}
Raw spans/s (wall) per repeat: {raw}. Per CPU-second per repeat: {raw_cpu}{pairs}. Redis replies parsed by {parsers}. A floor in the same run: a plain kafka-python consumer reading and
decoding the same records (nothing else) reaches {plain:,.0f} spans/s.

### Where the assembler's time goes (µs per span, median over repeats)

CPU: the main thread's CPU time in each stage (the loop is single-threaded); the Kafka producer's sender and the
consumer's heartbeat threads run beside it and are shown as one line; wall clock in brackets.

{prof_table}
"""


if __name__ == "__main__":
    raise SystemExit(main())
