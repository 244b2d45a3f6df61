"""Metrics worker benchmark (issue 3): throughput per process, and lag under a steady input rate.

1. Throughput: the simulator's events (traces, feedback, releases) are
   produced straight to Kafka as the API stores them, then one
   `python -m workers.metrics` process drains them; events/s from its own
   counters. Reference in the same run: a plain kafka-python consumer reading
   the same topics with no processing (the client's ceiling).
2. Lag: the API is fed at a fixed rate for a minute by the simulator; every
   second the worker's consumer lag (records) is sampled, and the delay from
   the API receiving an event to the worker committing it is read from
   ragmon_worker_ingest_to_commit_duration_seconds.
Usage: python tests/bench/bench_metrics_worker.py [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import orjson
import redis
from kafka import KafkaConsumer, KafkaProducer

from service.contracts import Topics, record_key
from service.contracts.kafka import ensure_topics
from service.contracts.settings import CommonSettings
from service.local.embedded import free_port, start_broker, start_redis, wait_for_port
from service.simulate.run import run_send
from service.simulate.scenario import load_scenario
from service.simulate.sender import SendConfig
from service.simulate.stream import generate_events
from tests.bench.common import ROOT, median, percentile, ragmon_argv, spawn, write_report
from tests.support.workers import WorkerProcess, metric_sum

WORK = ROOT / "tests" / "bench" / ".work"


def stored_records(n: int) -> list[tuple[str, bytes, bytes]]:
    scenario = load_scenario("clean").with_overrides(duration_s=None)
    anchor = datetime.now(UTC) - timedelta(hours=1)
    now = datetime.now(UTC).isoformat()
    out = []
    for ev in generate_events(scenario, anchor):
        if ev.type not in ("trace", "feedback", "release"):
            continue
        env = ev.envelope(anchor)
        value = orjson.dumps({"schema_version": 1, "tenant": ev.tenant, "received_at": now, **env,
                              "id": str(uuid.uuid4())})
        out.append((ev.type, record_key(ev.type, ev.tenant, ev.body), value))
        if len(out) == n:
            return out
    raise RuntimeError("scenario ended early")


def preload(bootstrap: str, topics: Topics, records: list[tuple[str, bytes, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="lz4", linger_ms=5,
                             batch_size=512 * 1024)
    for etype, key, value in records:
        producer.send(topics.for_event(etype), key=key, value=value)
    producer.flush()
    producer.close()


def raw_consume_rate(bootstrap: str, topics: Topics, n: int) -> float:
    consumer = KafkaConsumer(topics.traces, topics.feedback, topics.releases, bootstrap_servers=bootstrap,
                             group_id=f"raw-{uuid.uuid4().hex[:6]}", auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=1000,
                             max_poll_records=500)
    got, started = 0, None
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        polled = consumer.poll(500)
        if polled and started is None:
            started = time.perf_counter()
        got += sum(len(v) for v in polled.values())
    elapsed = time.perf_counter() - (started or time.perf_counter())
    consumer.close()
    return got / elapsed if elapsed else float("nan")


def throughput(bootstrap: str, redis_url: str, records: list[tuple[str, bytes, bytes]], rep: int) -> tuple[float, float]:
    prefix = f"bench{rep}{uuid.uuid4().hex[:6]}"
    topics = Topics(prefix)
    # Every repetition replays the same event ids: forget the previous run's done-keys.
    redis.Redis.from_url(redis_url).flushdb()
    settings = CommonSettings(kafka_bootstrap_servers=bootstrap, kafka_topic_prefix=prefix, kafka_partitions=4)
    ensure_topics(settings)
    preload(bootstrap, topics, records)
    env = {"RAGMON_KAFKA_BOOTSTRAP_SERVERS": bootstrap, "RAGMON_REDIS_URL": redis_url,
           "RAGMON_KAFKA_TOPIC_PREFIX": prefix, "RAGMON_WORKER_MAX_BATCH": "1000",
           "PYTHONPATH": str(ROOT)}
    worker = WorkerProcess("workers.metrics", env, WORK / f"metrics-tp-{rep}.log")
    try:
        first = last = None
        done = 0
        deadline = time.monotonic() + 300
        while done < len(records) and time.monotonic() < deadline:
            done = metric_sum(worker.scrape(), "ragmon_worker_events_total", outcome="processed")
            now = time.perf_counter()
            if done and first is None:
                first = (now, done)
            last = (now, done)
            time.sleep(0.2)
        assert first and last and done == len(records), f"processed {done} of {len(records)}"
        rate = (last[1] - first[1]) / (last[0] - first[0])
    finally:
        worker.terminate()
    return rate, raw_consume_rate(bootstrap, topics, len(records))


def lag_under_load(bootstrap: str, redis_url: str, events_per_s: float, seconds: int) -> dict[str, float]:
    prefix = f"lag{uuid.uuid4().hex[:6]}"
    port = free_port()
    key = "bench-lag-key"
    env = {"RAGMON_KAFKA_BOOTSTRAP_SERVERS": bootstrap, "RAGMON_REDIS_URL": redis_url,
           "RAGMON_KAFKA_TOPIC_PREFIX": prefix, "RAGMON_DEV_API_KEY": key, "RAGMON_DEV_TENANT": "bench",
           "PYTHONPATH": str(ROOT)}
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
        manifest = run_send(scenario, SendConfig(api=f"http://127.0.0.1:{port}", default_key=key, senders=2),
                            keep_truth=False)
        time.sleep(3)
        stop.set()
        sampler.join()
        samples = worker.scrape()
        sent = sum(manifest["events"]["accepted"].values())
        return {"sent": sent, "rate": sent / seconds, "lag_max": max(lags), "lag_p99": percentile(lags, 99),
                "delay_p50": _hist_quantile(samples, 0.5), "delay_p99": _hist_quantile(samples, 0.99)}
    finally:
        worker.terminate()
        api.terminate()
        api.wait(15)


def _sample_lag(worker: WorkerProcess, out: list[float], stop: threading.Event) -> None:
    while not stop.wait(1.0):
        out.append(metric_sum(worker.scrape(), "ragmon_worker_consumer_lag_messages"))


def _hist_quantile(samples: dict, q: float) -> float:  # type: ignore[type-arg]
    buckets = sorted((float(dict(ls)["le"]), v) for (n, ls), v in samples.items()
                     if n == "ragmon_worker_ingest_to_commit_duration_seconds_bucket")
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
    args = ap.parse_args()
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    records = stored_records(args.events)
    broker, redis_server = start_broker(), start_redis()
    bootstrap, redis_url = f"127.0.0.1:{broker.port}", f"redis://127.0.0.1:{redis_server.port}/0"
    try:
        runs = [throughput(bootstrap, redis_url, records, rep) for rep in range(args.repeats)]
        lag = lag_under_load(bootstrap, redis_url, args.lag_rate, args.lag_seconds)
    finally:
        redis_server.stop()
        broker.stop()
    worker_rate, raw_rate = median([r[0] for r in runs]), median([r[1] for r in runs])
    rows = "\n".join(f"| {i + 1} | {w:,.0f} | {r:,.0f} | {w / r:.2f} |" for i, (w, r) in enumerate(runs))
    body = f"""### Throughput of one metrics-worker process

{args.events:,} simulator events (traces, feedback, releases in the `clean` mix) produced to Kafka as the API
stores them, then drained by one `python -m workers.metrics` process (batches of up to 1,000; decode, contract
validation, dedupe keys in Redis, feedback joins in Redis, commit). Reference: a plain kafka-python consumer
reading the same topics without processing, in the same run.

| run | worker events/s | raw consume events/s | worker / raw |
|---|---|---|---|
{rows}

**Median: {worker_rate:,.0f} events/s per process** (target ≥ 5,000), raw consumer {raw_rate:,.0f} events/s
({worker_rate / raw_rate:.0%} of it).

### Lag at a steady input rate

The simulator fed the API at {lag['rate']:,.0f} events/s for {args.lag_seconds} s ({lag['sent']:,.0f} events
acknowledged); one metrics-worker process consumed them. Consumer lag sampled every second: max
{lag['lag_max']:,.0f} records, p99 {lag['lag_p99']:,.0f} records (≈ {lag['lag_max'] / max(lag['rate'], 1):.2f} s of
input at that rate). Delay from the API receiving an event to the worker committing it (histogram bucket bounds):
p50 ≤ {lag['delay_p50']} s, p99 ≤ {lag['delay_p99']} s (target: lag under 2 s at 1,000 events/s).
"""
    write_report("metrics_worker", "Metrics worker benchmark", body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
