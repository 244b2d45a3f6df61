"""The API's two uses of pinned libraries' private internals, each against the public API, in the same run.

1. kafka-python (service/api/kafka_private.py): a request's records go straight into the
   producer's accumulator (`append_records`, `on_completion`) where the public way is `send()`
   per record with `add_callback` and `add_errback` on its future. The same stored trace
   records, the API's producer settings, the same private Tansu broker; the two ways take
   turns, one producer each, until every record is acknowledged.
2. uvicorn (service/api/processes.py): `ragmon api --workers 2`, whose parent deals each new
   connection to the next process (`HandoffServer` drives uvicorn's Server from its internals),
   against two API processes sharing one SO_REUSEPORT port through uvicorn's public
   `Server.run(sockets=)` (tests/bench/reuseport_api.py): bench_ingest.py's load (trace batches
   of 100, 4 keep-alive clients, new connections each run), taking turns. Also how 4
   connections split over 2 processes both ways, from the real dealing loop and the kernel.

Usage: python -m tests.bench.bench_private [--out PATH] [--repeats N] [--api-repeats N] [--seconds S]
Traffic only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import itertools
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from service.api.kafka_private import append_records, on_completion, partitions_known
from service.api.processes import _deal_connections
from service.contracts.stored import stored_from_envelope
from service.local.embedded import ChildProcess, free_port, start_broker, start_redis
from tests.bench.bench_ingest import (
    BATCH,
    KEY,
    RAW_HEADERS,
    api_cpu_s,
    api_env,
    start_api,
    trace_envelopes,
    warm_api_producer,
)
from tests.bench.common import ROOT, build_request, median, percentile, run_load, spawn, write_report


@dataclass
class ProduceRun:
    records_per_s: float  # every record acknowledged (acks=all), over the wall clock
    caller_us: float  # CPU µs per record on the calling thread (in the API: the event loop)
    process_us: float  # CPU µs per record of the whole process (the caller and kafka-python's sender)


def produce(bootstrap: str, records: list[bytes], keys: list[bytes], topic: str, way: str) -> ProduceRun:
    producer = warm_api_producer(bootstrap, topic)
    counter = itertools.count()
    failed: list[BaseException] = []

    def ack(_metadata: object) -> None:
        next(counter)

    started, caller, process = time.perf_counter(), time.thread_time(), time.process_time()
    if way == "public":
        for key, value in zip(keys, records, strict=True):
            future = producer.send(topic, key=key, value=value, headers=RAW_HEADERS)
            future.add_callback(ack)
            future.add_errback(failed.append)
    else:
        for i in range(0, len(records), BATCH):
            assert partitions_known(producer, [topic])  # what the API asks per request
            batch = [
                (topic, keys[j], records[j], RAW_HEADERS) for j in range(i, min(i + BATCH, len(records)))
            ]
            on_completion(append_records(producer, batch), ack, failed.append)
    caller = time.thread_time() - caller
    producer.flush()
    elapsed, process = time.perf_counter() - started, time.process_time() - process
    producer.close()
    acked = next(counter)
    assert acked == len(records) and not failed, (
        f"{way}: {acked} of {len(records)} acknowledged, {failed[:1]}"
    )
    n = len(records)
    return ProduceRun(n / elapsed, caller / n * 1e6, process / n * 1e6)


def reuseport_splits(trials: int) -> Counter[tuple[int, int]]:
    """How 4 new connections to one port land on 2 SO_REUSEPORT listeners, `trials` times."""
    out: Counter[tuple[int, int]] = Counter()
    for _ in range(trials):
        port = free_port()
        listeners = []
        for _ in range(2):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen(16)
            listeners.append(sock)
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        counts = [0, 0]
        while sum(counts) < 4:
            ready, _, _ = select.select(listeners, [], [], 2)
            assert ready, "a connection was not accepted"
            for sock in ready:
                sock.accept()[0].close()
                counts[listeners.index(sock)] += 1
        out[(min(counts), max(counts))] += 1
        for sock in clients + listeners:
            sock.close()
    return out


def dealt_splits(trials: int) -> Counter[tuple[int, int]]:
    """How 4 new connections land on 2 children dealt to by processes._deal_connections, `trials` times."""
    out: Counter[tuple[int, int]] = Counter()
    children = []
    for _ in range(2):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        children.append((subprocess.Popen(["sleep", "600"]), ours, theirs))
    try:
        for _ in range(trials):
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            listener.settimeout(0.05)
            stop = threading.Event()
            dealer = threading.Thread(
                target=_deal_connections, args=(listener, [(p, o) for p, o, _ in children], stop.is_set)
            )
            dealer.start()
            clients = [socket.create_connection(listener.getsockname()) for _ in range(4)]
            counts = [0, 0]
            while sum(counts) < 4:
                ready, _, _ = select.select([t for _, _, t in children], [], [], 2)
                assert ready, "no connection was handed over"
                for channel in ready:
                    _, fds, _, _ = socket.recv_fds(channel, 16, 16)
                    for fd in fds:
                        os.close(fd)
                    counts[[t for _, _, t in children].index(channel)] += len(fds)
            stop.set()
            dealer.join()
            out[(min(counts), max(counts))] += 1
            for sock in [*clients, listener]:
                sock.close()
    finally:
        for proc, ours, theirs in children:
            proc.kill()
            proc.wait(5)
            ours.close()
            theirs.close()
    return out


@dataclass
class ApiRun:
    eps: float
    p99_ms: float
    cpu_us: float  # CPU µs of the API's processes per event answered 202 (warm-up included)


def wait_all_ready(procs: list[subprocess.Popen[bytes]], port: int, timeout: float = 180) -> None:
    """/readyz 200 on 20 new connections in a row: with SO_REUSEPORT each may land on either process."""
    deadline, streak = time.monotonic() + timeout, 0
    while streak < 20:
        assert time.monotonic() < deadline, f"API on port {port} not ready in {timeout:.0f} s"
        assert all(p.poll() is None for p in procs), "an API process exited; see tests/bench/.work/"
        try:
            streak = (
                streak + 1
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=15).status_code == 200
                else 0
            )
        except httpx.HTTPError:
            streak = 0
        if streak == 0:
            time.sleep(0.5)


def start_reuseport(env: dict[str, str], metrics_dir: str) -> tuple[list[subprocess.Popen[bytes]], int]:
    port = free_port()
    procs = [
        spawn(
            [sys.executable, "-m", "tests.bench.reuseport_api", str(port)],
            {**env, "PYTHONPATH": str(ROOT), "PROMETHEUS_MULTIPROC_DIR": metrics_dir},
            ROOT / "tests" / "bench" / ".work" / f"api-reuseport-{i}.log",
            cwd=ROOT,
        )
        for i in range(2)
    ]
    return procs, port


def load_api(pids: list[int], port: int, bodies: list[bytes], clients: int, seconds: float) -> ApiRun:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    requests = [build_request("127.0.0.1", port, "/v1/events", b, headers) for b in bodies]
    cpu = sum(api_cpu_s(pid) for pid in pids)
    load = run_load("127.0.0.1", port, requests, BATCH, clients, warmup_s=2, measure_s=seconds)
    cpu = sum(api_cpu_s(pid) for pid in pids) - cpu
    assert load.events_ok, f"no batch was accepted: {load.statuses}"
    return ApiRun(load.events_per_s, percentile(load.latencies_s, 99) * 1000, cpu / load.events_all * 1e6)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=5, help="turns of each way into kafka-python")
    ap.add_argument("--records", type=int, default=20_000, help="records per produce run")
    ap.add_argument("--api-repeats", type=int, default=3, help="turns of each way to run two API processes")
    ap.add_argument("--seconds", type=float, default=8.0, help="measured seconds per API run")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--split-trials", type=int, default=200)
    args = ap.parse_args()

    envelopes = trace_envelopes(2000)
    bodies = [orjson.dumps({"events": envelopes[i : i + BATCH]}) for i in range(0, len(envelopes), BATCH)]
    stored = [orjson.dumps(stored_from_envelope(e, "bench", e["timestamp"])) for e in envelopes]
    records = (stored * (args.records // len(stored) + 1))[: args.records]
    keys = [f"bench/req-{i % 64}".encode() for i in range(len(records))]
    load_before = os.getloadavg()[0]
    splits = {"dealt": dealt_splits(args.split_trials), "reuseport": reuseport_splits(args.split_trials)}
    broker, redis = start_broker(), start_redis()
    bootstrap = f"127.0.0.1:{broker.port}"
    produced: dict[str, list[ProduceRun]] = {"public": [], "private": []}
    apis: dict[str, list[ApiRun]] = {"dealt": [], "reuseport": []}
    started: list[subprocess.Popen[bytes]] = []
    try:
        for rep in range(args.repeats):
            for way in ("public", "private") if rep % 2 == 0 else ("private", "public"):
                produced[way].append(produce(bootstrap, records, keys, f"bench-private-{way}-{rep}", way))
                print(f"produce {way} run {rep}: {produced[way][-1]}", flush=True)
        env = api_env(bootstrap, redis.port)
        with tempfile.TemporaryDirectory(prefix="ragmon-bench-metrics-") as metrics_dir:
            dealt, dealt_port = start_api(ROOT, env, 2, "private-dealt")
            started.append(dealt)
            reuse, reuse_port = start_reuseport(env, metrics_dir)
            started += reuse
            wait_all_ready([dealt], dealt_port)
            wait_all_ready(reuse, reuse_port)
            targets = {"dealt": ([dealt.pid], dealt_port), "reuseport": ([p.pid for p in reuse], reuse_port)}
            for rep in range(args.api_repeats):
                for name in ("dealt", "reuseport") if rep % 2 == 0 else ("reuseport", "dealt"):
                    apis[name].append(load_api(*targets[name], bodies, args.clients, args.seconds))
                    print(f"api {name} run {rep}: {apis[name][-1]}", flush=True)
    finally:
        for proc in reversed(started):
            ChildProcess("api", proc, 0).stop(15)
        redis.stop()
        broker.stop()
    body = report(args, produced, apis, splits, (load_before, os.getloadavg()[0]))
    write_report("private", "Private internals against the public API", body, args.out)
    return 0


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "n/a"


def report(
    args: argparse.Namespace,
    produced: dict[str, list[ProduceRun]],
    apis: dict[str, list[ApiRun]],
    splits: dict[str, Counter[tuple[int, int]]],
    load: tuple[float, float],
) -> str:
    def med(runs: list[Any], field: str) -> float:
        return median([getattr(r, field) for r in runs])

    pub, priv = produced["public"], produced["private"]
    lines = [
        f"`python -m tests.bench.bench_private --repeats {args.repeats} --records {args.records} "
        f"--api-repeats {args.api_repeats} --seconds {args.seconds:g} --split-trials {args.split_trials}`; 1-minute load average {load[0]:.1f} before, {load[1]:.1f} after "
        "(other processes share this machine: the ratios, measured in turns, are the result).",
        "",
        "## kafka-python: `append_records` + `on_completion` against `send()` + `add_callback`/`add_errback`",
        "",
        f"{args.records:,} stored trace records a run, the API's four headers, acks=all, lz4, one producer "
        f"a run into a memory-only Tansu broker; medians of {args.repeats} runs of each way, taking turns. "
        "Caller CPU is the thread that hands the records over (in the API, the event loop's).",
        "",
        "| way | records/s (acked) | caller CPU µs/record | process CPU µs/record |",
        "|---|---:|---:|---:|",
        *[
            f"| {name} | {med(runs, 'records_per_s'):,.0f} | {med(runs, 'caller_us'):.1f} | "
            f"{med(runs, 'process_us'):.1f} |"
            for name, runs in (("public `send()`", pub), ("private `append_records`", priv))
        ],
        f"| private / public | {_ratio(med(priv, 'records_per_s'), med(pub, 'records_per_s'))} | "
        f"{_ratio(med(priv, 'caller_us'), med(pub, 'caller_us'))} | "
        f"{_ratio(med(priv, 'process_us'), med(pub, 'process_us'))} |",
        "",
        "Runs (records/s, caller µs, process µs): "
        + "; ".join(
            f"{way} {r.records_per_s:,.0f} / {r.caller_us:.1f} / {r.process_us:.1f}"
            for way in ("public", "private")
            for r in produced[way]
        ),
        "",
        "## uvicorn: connections dealt by the parent against SO_REUSEPORT",
        "",
        f"Two API processes on one port, {args.clients} keep-alive clients (new connections each run), "
        f"trace batches of {BATCH}, {args.seconds:g} s measured after 2 s; medians of {args.api_repeats} "
        "runs of each way, taking turns. CPU: the API's processes per event answered 202.",
        "",
        "| way | events/s | p99 ms/batch | API CPU µs/event | events/s of each run |",
        "|---|---:|---:|---:|---|",
        *[
            f"| {name} | {med(apis[key], 'eps'):,.0f} | {med(apis[key], 'p99_ms'):.1f} | "
            f"{med(apis[key], 'cpu_us'):.0f} | {', '.join(f'{r.eps:,.0f}' for r in apis[key])} |"
            for key, name in (("dealt", "dealt (`ragmon api --workers 2`)"), ("reuseport", "SO_REUSEPORT"))
        ],
        f"| dealt / SO_REUSEPORT | {_ratio(med(apis['dealt'], 'eps'), med(apis['reuseport'], 'eps'))} | "
        f"{_ratio(med(apis['dealt'], 'p99_ms'), med(apis['reuseport'], 'p99_ms'))} | "
        f"{_ratio(med(apis['dealt'], 'cpu_us'), med(apis['reuseport'], 'cpu_us'))} | |",
        "",
        f"How 4 new connections split over 2 processes, {args.split_trials} trials each: "
        + "; ".join(
            f"{way}: "
            + ", ".join(f"{lo}:{hi} {n}×" for (lo, hi), n in sorted(splits[way].items(), reverse=True))
            for way in ("dealt", "reuseport")
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
