"""Metrics worker benchmark: throughput of one process end to end, and lag under a steady input rate.

1. Throughput: the simulator's events (traces, feedback, releases) are
   produced straight to Kafka as the API stores them, then one worker process
   runs its real runtime loop on them, from the record bytes to the commit
   (decode, dedupe keys, feedback joins in Redis, commit), timed by stage
   (tests/bench/e2e.py). The reference is the same runner on another git
   revision (--reference), taking turns within each repeat.
2. Lag: the API is fed at a fixed rate for a minute by the simulator; every
   second the worker's consumer lag (records) is sampled, and the delay from
   the API receiving an event to the worker committing it is read from
   ragmon_worker_ingest_to_commit_duration_seconds.
Usage: python tests/bench/bench_metrics_worker.py [--reference REV] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import orjson

from service.contracts import record_key
from service.contracts.stored import stored_from_envelope
from service.local.embedded import free_port, start_broker, start_redis, wait_for_port
from service.simulate.run import run_send
from service.simulate.scenario import load_scenario
from service.simulate.sender import SendConfig
from service.simulate.stream import generate_events
from tests.bench import e2e
from tests.bench.common import ROOT, percentile, ragmon_argv, spawn, write_report
from tests.support.workers import WorkerProcess, metric_sum

WORK = ROOT / "tests" / "bench" / ".work"
TARGET_PER_S = 5_000


def stored_records(n: int) -> list[tuple[str, bytes | None, bytes]]:
    scenario = load_scenario("clean").with_overrides(duration_s=None)
    anchor = datetime.now(UTC) - timedelta(hours=1)
    now = datetime.now(UTC).isoformat()
    out: list[tuple[str, bytes | None, bytes]] = []
    for ev in generate_events(scenario, anchor):
        if ev.type not in ("trace", "feedback", "release"):
            continue
        env = ev.envelope(anchor)
        value = orjson.dumps(stored_from_envelope({**env, "id": str(uuid.uuid4())}, ev.tenant, now))
        out.append((ev.type, record_key(ev.type, ev.tenant, ev.body), value))
        if len(out) == n:
            return out
    raise RuntimeError("scenario ended early")


def lag_under_load(bootstrap: str, redis_url: str, events_per_s: float, seconds: int) -> dict[str, float]:
    prefix = f"lag{uuid.uuid4().hex[:6]}"
    port = free_port()
    key = "bench-lag-key"
    env = {
        "RAGMON_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "RAGMON_REDIS_URL": redis_url,
        "RAGMON_KAFKA_TOPIC_PREFIX": prefix,
        "RAGMON_DEV_API_KEY": key,
        "RAGMON_DEV_TENANT": "bench",
        "PYTHONPATH": str(ROOT),
    }
    api = spawn(ragmon_argv("api", "--port", str(port), "--log-level", "warning"), env, WORK / "lag-api.log")
    worker = WorkerProcess("workers.metrics", env, WORK / "lag-metrics.log")
    lags: list[float] = []
    try:
        wait_for_port("127.0.0.1", port, 30, api)
        time.sleep(2)
        # The clean scenario sends about 1.7 events per request (trace + feedback + releases).
        scenario = load_scenario("clean").with_overrides(duration_s=seconds, rate=events_per_s / 1.7)
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_lag, args=(worker, lags, stop), daemon=True)
        sampler.start()
        manifest = run_send(
            scenario, SendConfig(api=f"http://127.0.0.1:{port}", default_key=key, senders=2), keep_truth=False
        )
        time.sleep(3)
        stop.set()
        sampler.join()
        samples = worker.scrape()
        sent = sum(manifest["events"]["accepted"].values())
        return {
            "sent": sent,
            "rate": sent / seconds,
            "lag_max": max(lags),
            "lag_p99": percentile(lags, 99),
            "delay_p50": _hist_quantile(samples, 0.5),
            "delay_p99": _hist_quantile(samples, 0.99),
        }
    finally:
        worker.terminate()
        api.terminate()
        api.wait(15)


def _sample_lag(worker: WorkerProcess, out: list[float], stop: threading.Event) -> None:
    while not stop.wait(1.0):
        out.append(metric_sum(worker.scrape(), "ragmon_worker_consumer_lag_messages"))


def _hist_quantile(samples: dict, q: float) -> float:
    buckets = sorted(
        (float(dict(ls)["le"]), v)
        for (n, ls), v in samples.items()
        if n == "ragmon_worker_ingest_to_commit_duration_seconds_bucket"
    )
    total = buckets[-1][1]
    for le, count in buckets:
        if count >= q * total:
            return le
    return float("inf")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--events", type=int, default=30_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lag-rate", type=float, default=1000.0)
    ap.add_argument("--lag-seconds", type=int, default=60)
    ap.add_argument("--reference", default=None, help="git revision measured as the reference")
    args = ap.parse_args()
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    load_before = os.getloadavg()[0]
    records = stored_records(args.events)
    runs = e2e.measure(e2e.Workload("metrics", records), args.repeats, args.reference)
    results = {path: e2e.summary(path_runs) for path, path_runs in runs.items()}
    load_after = os.getloadavg()[0]
    broker, redis_server = start_broker(), start_redis()
    bootstrap, redis_url = f"127.0.0.1:{broker.port}", f"redis://127.0.0.1:{redis_server.port}/0"
    try:
        lag = (
            lag_under_load(bootstrap, redis_url, args.lag_rate, args.lag_seconds)
            if args.lag_seconds
            else None
        )
    finally:
        redis_server.stop()
        broker.stop()
    body = throughput_section(results, args, (load_before, load_after))
    body += (
        _lag_section(lag, args.lag_seconds)
        if lag
        else "\n### Lag at a steady input rate\n\nNot measured (--lag-seconds 0).\n"
    )
    write_report("metrics_worker", "Metrics worker benchmark", body, args.out)
    return 0


def throughput_section(
    results: dict[str, dict[str, float]], args: argparse.Namespace, load: tuple[float, float]
) -> str:
    load_before, load_after = load
    change = results["change"]
    verdict = "meets" if change["e2e_cpu"] >= TARGET_PER_S else "MISSES"
    return f"""`python tests/bench/bench_metrics_worker.py --reference {args.reference}` — {args.events:,} simulator
events (traces, feedback, releases in the `clean` mix) stored in a private Tansu broker as the API stores them;
one worker process runs its real runtime loop (batches of up to 500) until every record is committed. Median of
{args.repeats} repeats; the change and the reference (`{args.reference}`) take turns within each repeat. 1-minute
load average {load_before:.1f} before, {load_after:.1f} after (a shared 2-core machine: the CPU-second columns are
what one process sustains on a core of its own).

### End to end: record bytes -> commit, decode and Redis included, one process

{e2e.headline_table(results, "events")}

Target ≥ {TARGET_PER_S:,} events/s per process, end to end, on a core of its own (per CPU-second):
**{verdict}** ({change["e2e_cpu"] / TARGET_PER_S:.1f}× the target; {change["e2e"] / TARGET_PER_S:.1f}× on the wall
clock of this loaded machine). {e2e.ratio_line(results)}

### Where the time goes (µs per event, median over repeats)

{e2e.profile_table(results, "event")}

The change decodes each record once, with msgspec, into the metrics worker's views (workers/metrics/views.py:
timings, usage, answer outcome, ids and labels; the texts, documents and samples it never reads are skipped).
"""


def _lag_section(lag: dict[str, float], seconds: int) -> str:
    return f"""
### Lag at a steady input rate

The simulator fed the API at {lag["rate"]:,.0f} events/s for {seconds} s ({lag["sent"]:,.0f} events
acknowledged); one metrics-worker process consumed them. Consumer lag sampled every second: max
{lag["lag_max"]:,.0f} records, p99 {lag["lag_p99"]:,.0f} records (≈ {lag["lag_max"] / max(lag["rate"], 1):.2f} s of
input at that rate). Delay from the API receiving an event to the worker committing it (histogram bucket bounds):
p50 ≤ {lag["delay_p50"]} s, p99 ≤ {lag["delay_p99"]} s (target: lag under 2 s at 1,000 events/s).
"""


if __name__ == "__main__":
    raise SystemExit(main())
