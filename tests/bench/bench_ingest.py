"""Sustained durable ingestion through POST /v1/events (issue 2's benchmark).

Trace events from the simulator's clean scenario, batches of 100, several
concurrent keep-alive clients on 127.0.0.1, against `ragmon api --workers 2`
(its parent deals the connections to two API processes) producing with acks=all to a Tansu broker. Reference, same run, same
broker: kafka-python producing the same stored records directly (the raw
produce ceiling). Usage: python tests/bench/bench_ingest.py [--out PATH]
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson
from kafka import KafkaProducer

from service.local.embedded import free_port, start_broker, start_redis, wait_for_port
from service.simulate.scenario import load_scenario
from service.simulate.stream import generate_events
from tests.bench.common import (
    ROOT,
    build_request,
    median,
    peak_rss_mb,
    percentile,
    ragmon_argv,
    run_load,
    spawn,
    write_report,
)

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


def raw_produce_ceiling(bootstrap: str, records: list[bytes], topic: str) -> float:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="lz4", linger_ms=2,
                             batch_size=512 * 1024, max_request_size=16 * 1024 * 1024)
    producer.send(topic, b"warm").get(10)
    started = time.perf_counter()
    futures = [producer.send(topic, key=str(i % 64).encode(), value=v) for i, v in enumerate(records)]
    producer.flush()
    for f in futures:
        f.get(0)
    elapsed = time.perf_counter() - started
    producer.close()
    return len(records) / elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--api-workers", type=int, default=2, help="`ragmon api --workers`: API processes")
    args = ap.parse_args()

    envelopes = trace_envelopes(5000)
    bodies = [orjson.dumps({"events": envelopes[i:i + BATCH]}) for i in range(0, len(envelopes), BATCH)]
    stored = [orjson.dumps({"schema_version": 1, "tenant": "bench", "received_at": e["timestamp"], **e})
              for e in envelopes]
    avg_event = sum(len(orjson.dumps(e)) for e in envelopes) / len(envelopes)

    broker = start_broker()
    redis = start_redis()
    port = free_port()
    env = {"RAGMON_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{broker.port}",
           "RAGMON_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0", "RAGMON_DEV_API_KEY": KEY,
           "RAGMON_DEV_TENANT": "bench", "RAGMON_RATE_LIMIT_EPS": "1000000", "RAGMON_RATE_LIMIT_BURST": "2000000"}
    api = spawn(ragmon_argv("api", "--port", str(port), "--log-level", "warning", "--workers",
                            str(args.api_workers)), env,
                ROOT / "tests" / "bench" / ".work" / "api.log")
    rows = []
    try:
        wait_for_port("127.0.0.1", port, 30, api)
        while httpx.get(f"http://127.0.0.1:{port}/readyz").status_code != 200:
            time.sleep(0.2)
        headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        requests = [build_request("127.0.0.1", port, "/v1/events", b, headers) for b in bodies]
        for rep in range(args.repeats):
            load = run_load("127.0.0.1", port, requests, BATCH, args.clients, warmup_s=3, measure_s=args.seconds)
            ceiling = raw_produce_ceiling(f"127.0.0.1:{broker.port}", stored * 2, f"bench-raw-{rep}")
            rows.append((load.events_per_s, median(load.latencies_s) * 1000, percentile(load.latencies_s, 99) * 1000,
                         ceiling, dict(load.statuses)))
            print(f"run {rep}: {rows[-1]}", flush=True)
        rss = api_rss_mb(api.pid)
    finally:
        api.terminate()
        api.wait(15)
        redis.stop()
        broker.stop()

    eps = median([r[0] for r in rows])
    p50 = median([r[1] for r in rows])
    p99 = median([r[2] for r in rows])
    ceiling = median([r[3] for r in rows])
    table = "\n".join(f"| {i + 1} | {r[0]:,.0f} | {r[1]:.1f} | {r[2]:.1f} | {r[3]:,.0f} | {r[0] / r[3]:.2f} | {r[4]} |"
                      for i, r in enumerate(rows))
    body = f"""Trace events from the simulator's `clean` scenario (mean {avg_event:,.0f} bytes of JSON per event),
batches of {BATCH}, {args.clients} concurrent keep-alive clients on 127.0.0.1, {args.seconds:.0f} s measured after a
3 s warm-up, {args.repeats} repetitions. `ragmon api --workers {args.api_workers}` ({args.api_workers} API processes; the parent deals connections to them in turn) validating, redacting and
producing every event with acks=all (lz4) to a memory-only Tansu broker on the same 2-core machine; the load client
and the broker share those cores. Counted: events in requests answered 202 (every one acknowledged by the broker).

Reference: kafka-python producing the same stored records straight to the same broker (acks=all, lz4), in the
same run: the raw produce ceiling of the client library, with no HTTP, validation or redaction.

| run | API events/s | median ms/batch | p99 ms/batch | raw produce events/s | API / raw | statuses |
|---|---|---|---|---|---|---|
{table}

**Medians:** {eps:,.0f} trace events/s acknowledged (target ≥ 5,000), median {p50:.1f} ms and p99 {p99:.1f} ms per
batch of {BATCH} (target p99 < 100 ms), raw produce ceiling {ceiling:,.0f} events/s (API reaches
{eps / ceiling:.0%} of it). API peak RSS (all its processes): {rss:.0f} MB.
"""
    write_report("ingest", "Ingestion API benchmark", body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
