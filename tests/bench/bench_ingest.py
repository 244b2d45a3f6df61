"""Sustained durable ingestion through POST /v1/events (issue 2's benchmark).

Trace events from the simulator's clean scenario, batches of 100, several
concurrent keep-alive clients on 127.0.0.1, against `ragmon api --workers 2`
(its parent deals the connections to two API processes) producing with acks=all to a Tansu broker. Reference, same run, same
broker: kafka-python producing the same stored records directly (the raw
produce ceiling). Usage: python tests/bench/bench_ingest.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
from kafka import KafkaProducer

from service.api.kafka_private import append_records
from service.contracts import topics as T
from service.contracts.stored import stored_from_envelope
from service.local.embedded import free_port, start_broker, start_redis, wait_for_port
from service.simulate.scenario import load_scenario
from service.simulate.stream import generate_events
from tests.bench.common import (
    ROOT,
    build_request,
    median,
    peak_rss_mb,
    percentile,
    run_load,
    spawn,
    write_report,
)
from tests.bench.e2e import reference_tree

KEY = "bench-key"
BATCH = 100


def trace_envelopes(n: int) -> list[dict[str, object]]:
    scenario = load_scenario("clean").with_overrides(duration_s=None)
    anchor = datetime.now(UTC) - timedelta(minutes=5)
    out = []
    for ev in generate_events(scenario, anchor):
        if ev.type == "trace":
            out.append(ev.envelope(anchor))
            if len(out) == n:
                return out
    raise RuntimeError("scenario ended early")


def api_rss_mb(pid: int) -> float:
    """Peak RSS of the API: the process and, with --workers, its worker processes, summed."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in children.read_text().split()] if children.exists() else []
    return peak_rss_mb(pid) + sum(peak_rss_mb(k) for k in kids)


def api_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by the API: the parent and its worker processes."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    pids = [pid] + ([int(c) for c in children.read_text().split()] if children.exists() else [])
    ticks = 0
    for p in pids:
        fields = Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


RAW_HEADERS = [
    (T.H_EVENT_ID, b"0b7f9a52-6c0e-4c8e-9a51-2f1f7f0f3e11"),
    (T.H_EVENT_TYPE, b"trace"),
    (T.H_TENANT, b"bench"),
    (T.H_SCHEMA, b"1"),
]  # the headers the API puts on every record


def api_env(bootstrap: str, redis_port: int) -> dict[str, str]:
    """The benchmarked API's environment: the bench's broker and Redis, one dev key (tenant bench), rate
    limits far above any load sent."""
    return {
        "RAGMON_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "RAGMON_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "RAGMON_DEV_API_KEY": KEY,
        "RAGMON_DEV_TENANT": "bench",
        "RAGMON_RATE_LIMIT_EPS": "1000000",
        "RAGMON_RATE_LIMIT_BURST": "2000000",
    }


def warm_api_producer(bootstrap: str, topic: str) -> KafkaProducer:
    """A producer with the API's batching settings (service/api/producer.py), its metadata for `topic`
    already known, as for a running API."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type="lz4",
        linger_ms=2,
        batch_size=512 * 1024,
        max_request_size=16 * 1024 * 1024,
    )
    producer.send(topic, b"warm").get(10)
    return producer


def raw_produce_ceiling(bootstrap: str, records: list[bytes], topic: str, path: str) -> tuple[float, float]:
    """(records/s, CPU µs per record) producing `records` straight to the broker, the API's producer settings.

    path "send": kafka-python's public send() per record; "append": the API's own way into
    the same producer (service/api/kafka_private.append_records, 100 records per call as per
    request). The CPU time is this process's (the caller and kafka-python's sender thread).
    """
    producer = warm_api_producer(bootstrap, topic)
    keys = [f"bench/req-{i % 64}".encode() for i in range(len(records))]
    started, cpu = time.perf_counter(), time.process_time()
    if path == "send":
        futures = [
            producer.send(topic, key=k, value=v, headers=RAW_HEADERS)
            for k, v in zip(keys, records, strict=True)
        ]
    else:
        futures = []
        for i in range(0, len(records), BATCH):
            futures += append_records(
                producer,
                [(topic, keys[j], records[j], RAW_HEADERS) for j in range(i, min(i + BATCH, len(records)))],
            )
    producer.flush()
    for f in futures:
        f.get(0)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    producer.close()
    return len(records) / elapsed, cpu / len(records) * 1e6


def start_api(tree: Path, env: dict[str, str], api_workers: int, name: str) -> tuple[Any, int]:
    port = free_port()
    api = spawn(
        [
            sys.executable,
            "-m",
            "service.cli",
            "api",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--workers",
            str(api_workers),
        ],
        {**env, "PYTHONPATH": str(tree)},
        ROOT / "tests" / "bench" / ".work" / f"api-{name}.log",
        cwd=tree,
    )
    return api, port


def wait_ready(api: Any, port: int) -> None:
    wait_for_port("127.0.0.1", port, 120, api)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=15).status_code == 200:
                return
        except httpx.HTTPError:
            pass  # a loaded machine: ask again
        time.sleep(0.5)
    raise RuntimeError(f"API on port {port} not ready in 120 s")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--api-workers", type=int, default=2, help="`ragmon api --workers`: API processes")
    ap.add_argument("--reference", default=None, help="git revision whose API is measured too, interleaved")
    args = ap.parse_args()

    envelopes = trace_envelopes(5000)
    bodies = [orjson.dumps({"events": envelopes[i : i + BATCH]}) for i in range(0, len(envelopes), BATCH)]
    stored = [orjson.dumps(stored_from_envelope(e, "bench", e["timestamp"])) for e in envelopes]
    avg_event = sum(len(orjson.dumps(e)) for e in envelopes) / len(envelopes)
    trees = {"change": ROOT} | ({"reference": reference_tree(args.reference)} if args.reference else {})
    load_before = os.getloadavg()[0]
    broker = start_broker()
    redis = start_redis()
    env = api_env(f"127.0.0.1:{broker.port}", redis.port)
    apis: dict[str, tuple[Any, int]] = {}
    try:
        for path, tree in trees.items():
            apis[path] = start_api(tree, env, args.api_workers, path)  # registered first: stopped in finally
            wait_ready(*apis[path])
        rows = measure_apis(apis, args, bodies, stored, f"127.0.0.1:{broker.port}")
        rss = {path: api_rss_mb(api.pid) for path, (api, _) in apis.items()}
    finally:
        for api, _ in apis.values():
            api.terminate()
            api.wait(15)
        redis.stop()
        broker.stop()
    stages = {path: ingest_stages(tree, bodies) for path, tree in trees.items()}
    body = report(rows, rss, args, avg_event, (load_before, os.getloadavg()[0])) + stages_table(stages)
    write_report("ingest", "Ingestion API benchmark", body, args.out)
    return 0


@dataclass
class Row:
    eps: float  # events/s answered 202 in the measured window
    p50_ms: float
    p99_ms: float
    ceiling_send: float  # raw produce records/s through kafka-python's send()
    ceiling_append: float  # raw produce records/s through the API's append path into the same producer
    api_cpu_us: float  # CPU µs of the API's processes per event answered 202
    raw_cpu_us: float  # CPU µs per record of the faster raw produce
    statuses: dict[int, int]

    @property
    def ceiling(self) -> float:
        """The raw ceiling the API is held to: the faster of the two ways into kafka-python."""
        return max(self.ceiling_send, self.ceiling_append)


def measure_apis(
    apis: dict[str, tuple[Any, int]],
    args: argparse.Namespace,
    bodies: list[bytes],
    stored: list[bytes],
    bootstrap: str,
) -> dict[str, list[Row]]:
    """Each repeat loads every API in turn, each run followed by the raw produce ceilings (both ways)."""
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    rows: dict[str, list[Row]] = {path: [] for path in apis}
    for rep in range(args.repeats):
        for path, (api, port) in apis.items():
            requests = [build_request("127.0.0.1", port, "/v1/events", b, headers) for b in bodies]
            cpu = api_cpu_s(api.pid)
            load = run_load(
                "127.0.0.1", port, requests, BATCH, args.clients, warmup_s=3, measure_s=args.seconds
            )
            cpu = api_cpu_s(api.pid) - cpu
            # 20,000 records a way (a few seconds): one second's worth swung ±50% between neighbours' bursts.
            send, send_cpu = raw_produce_ceiling(
                bootstrap, stored * 4, f"bench-raw-{path}-{rep}-send", "send"
            )
            append, append_cpu = raw_produce_ceiling(
                bootstrap, stored * 4, f"bench-raw-{path}-{rep}-append", "append"
            )
            rows[path].append(
                Row(
                    load.events_per_s,
                    median(load.latencies_s) * 1000,
                    percentile(load.latencies_s, 99) * 1000,
                    send,
                    append,
                    cpu / load.events_all * 1e6 if load.events_all else float("nan"),
                    append_cpu if append >= send else send_cpu,
                    dict(load.statuses),
                )
            )
            print(f"{path} run {rep}: {rows[path][-1]}", flush=True)
    return rows


def ingest_stages(tree: Path, bodies: list[bytes]) -> dict[str, float]:
    """CPU µs per event by stage of the ingest pipeline, measured on `tree` (tests/bench/ingest_stages.py)."""
    work = ROOT / "tests" / "bench" / ".work"
    work.mkdir(parents=True, exist_ok=True)
    batches = work / "ingest_batches.json"
    batches.write_text(json.dumps([b.decode() for b in bodies[:30]]))
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "bench" / "ingest_stages.py"), str(batches)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    stages: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return stages


def stages_table(stages: dict[str, dict[str, float]]) -> str:
    paths = list(stages)
    rows = [
        ("full path, parse: JSON of the batch", lambda s: s["parse"]),
        ("prepare: validate, redact, stored record JSON", lambda s: s["prepare"]),
        ("of which body validation", lambda s: s["prepare"] - s["prepare_without_body_check"]),
        ("of which the rest", lambda s: s["prepare_without_body_check"]),
    ]
    lines = [
        "",
        "### Where the API's time goes before the producer (CPU µs per event, one process, no HTTP)",
        "",
        "| stage | " + " | ".join(paths) + " |",
        "|---|" + "---:|" * len(paths),
    ]
    lines += [
        f"| {name} | " + " | ".join(f"{get(stages[p]):.1f}" for p in paths) + " |" for name, get in rows
    ]
    lines.append(
        "| **plain form, the path nearly every batch takes: parse, validate, redact, stored record** | "
        + " | ".join(f"**{stages[p]['plain']:.1f}**" if "plain" in stages[p] else "— (none)" for p in paths)
        + " |"
    )
    lines += [
        "",
        "`python tests/bench/ingest_stages.py` on each tree, 3,000 of the same trace events, best of 5. "
        "The rest of an event's cost is the producer (records into kafka-python's accumulator, and its sender "
        "thread), HTTP and the event loop: `python tests/bench/profile_ingest.py` (py-spy) shows all of it, "
        "docs/throughput.md has the profile before and after.",
    ]
    return "\n".join(lines) + "\n"


def report(
    rows: dict[str, list[Row]],
    rss: dict[str, float],
    args: argparse.Namespace,
    avg_event: float,
    load: tuple[float, float],
) -> str:
    summary = {
        path: {
            "eps": median([r.eps for r in rs]),
            "p50": median([r.p50_ms for r in rs]),
            "p99": median([r.p99_ms for r in rs]),
            "ratio": median([r.eps / r.ceiling for r in rs]),
            "ceiling": median([r.ceiling for r in rs]),
            "send": median([r.ceiling_send for r in rs]),
            "ratio_send": median([r.eps / r.ceiling_send for r in rs]),
            "append": median([r.ceiling_append for r in rs]),
            "cpu": median([r.api_cpu_us for r in rs]),
            "raw_cpu": median([r.raw_cpu_us for r in rs]),
        }
        for path, rs in rows.items()
    }
    table = "\n".join(
        f"| {path} | {i + 1} | {r.eps:,.0f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.ceiling_send:,.0f} | "
        f"{r.ceiling_append:,.0f} | {r.eps / r.ceiling:.2f} | {r.api_cpu_us:.0f} | {r.raw_cpu_us:.0f} | "
        f"{r.statuses} |"
        for path, rs in rows.items()
        for i, r in enumerate(rs)
    )
    heads = "\n".join(
        f"| {path} | {s['eps']:,.0f} | {s['p50']:.1f} | {s['p99']:.1f} | {s['ceiling']:,.0f} | "
        f"**{s['ratio']:.0%}** | {s['cpu']:.0f} | {s['raw_cpu']:.0f} | {rss[path]:.0f} |"
        for path, s in summary.items()
    )
    c = summary["change"]
    versus = ""
    if "reference" in summary:
        r = summary["reference"]
        versus = (
            f" Against the reference (`{args.reference}`) in the same run: {c['eps'] / r['eps']:.2f}× the "
            f"events/s, {c['ratio'] / r['ratio']:.2f}× the share of the ceiling, {c['cpu'] / r['cpu']:.2f}× "
            "the API's CPU per event."
        )
    return f"""`python tests/bench/bench_ingest.py --reference {args.reference}` — trace events from the simulator's
`clean` scenario (mean {avg_event:,.0f} bytes of JSON per event), batches of {BATCH}, {args.clients} concurrent
keep-alive clients on 127.0.0.1, {args.seconds:.0f} s measured after a 3 s warm-up, {args.repeats} repetitions.
`ragmon api --workers {args.api_workers}` validating, redacting and producing every event with acks=all (lz4) to a
memory-only Tansu broker on the same 2-core machine; the load client and the broker share those cores. Counted:
events in requests answered 202 (every one acknowledged by the broker). 1-minute load average {load[0]:.1f} before,
{load[1]:.1f} after (other processes share this machine: absolute numbers depend on it, the ratios are the result).

Raw ceiling: one process producing the same stored records (with the API's four headers) straight to the same
broker with kafka-python (acks=all, lz4, the API's batching settings) right after each API run, no HTTP,
validation or redaction, measured two ways: kafka-python's public `send()` per record, and the API's own path
into the same producer (`append_records`, 100 records a call, as per request). The API is held to the faster of
the two in each run. The change and the reference revision's API (`--reference`) take turns within each
repetition. CPU µs per event: the API's processes' CPU time over the run (warm-up included) per event answered
202, and the raw producer's per record (its caller and sender thread): a machine's load slows both alike.

| API | events/s (median) | median ms/batch | p99 ms/batch | raw ceiling events/s | API / raw | API CPU µs/event | raw CPU µs/record | peak RSS MiB |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
{heads}

Targets: ≥ 70% of the raw ceiling, p99 < 100 ms per batch of {BATCH}, ≥ 5,000 events/s: change at
{c["ratio"]:.0%}, p99 {c["p99"]:.1f} ms, {c["eps"]:,.0f} events/s.{versus} Raw ceiling medians by path, change's runs:
`send()` {c["send"]:,.0f}/s, `append_records` {c["append"]:,.0f}/s; against `send()` alone (the ceiling of earlier
reports) the change is at {c["ratio_send"]:.0%}.

| API | run | events/s | median ms/batch | p99 ms/batch | raw send() /s | raw append /s | API / raw | API CPU µs/event | raw CPU µs/record | statuses |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|
{table}
"""


if __name__ == "__main__":
    raise SystemExit(main())
