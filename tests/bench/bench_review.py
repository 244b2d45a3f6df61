"""Review benchmark (issue 16): the sampler's throughput, and the review page with a million queued items.

1. Sampler: the simulator's traces (and one faithfulness score per ten traces)
   as the runtime hands them over, decoded from their Kafka bytes and
   processed by the review processor against a real Redis and PostgreSQL, in
   batches of 500. Reference in the same loop: the runtime's decode, timed
   batch by batch beside the processing.
2. Page: the queue filled with `--items` items (one tenant), then a reviewer
   asks for the next item, renders it and saves a label, over HTTP on
   loopback (an upper bound of the server-side time). Reference: GET /healthz.
Usage: python tests/bench/bench_review.py [--items 1000000] [--out PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import redis
from prometheus_client import CollectorRegistry

from service.contracts import reviewdb
from service.contracts.scores import score_record
from service.local.embedded import start_broker, start_redis
from service.local.postgres import create_database, start_postgres
from tests.bench.bench_metrics_worker import stored_records
from tests.bench.common import median, percentile, write_report
from tests.service.api.api_harness import RunningApi
from tests.service.review.review_harness import ANN_KEY, csrf_of, review_settings
from tests.workers.review.helpers import faithfulness_event
from workers.review.config import ReviewConfig
from workers.review.metrics import ReviewMetrics
from workers.review.processor import ReviewProcessor
from workers.review.store import QueueStore
from workers.runtime.decode import decode_record

BATCH = 500


class _Record:
    def __init__(self, topic: str, partition: int, offset: int, value: bytes, headers: list[Any]) -> None:
        self.topic, self.partition, self.offset, self.value, self.headers = topic, partition, offset, value, headers
        self.key, self.timestamp = None, 0


def sampler_records(n: int, topic: str) -> list[tuple[_Record, str]]:
    traces = [v for t, _, v in stored_records(n * 4) if t == "trace"][:n]
    if len(traces) < n:
        raise RuntimeError(f"the simulator gave {len(traces)} traces, fewer than {n}")
    out: list[tuple[_Record, str]] = []
    for i, value in enumerate(traces):
        out.append((_Record(f"{topic}.traces", 0, i, value, []), "trace"))
        if i % 10 == 0:
            doc = orjson.loads(value)
            body = faithfulness_event(0, 0.3 + (i % 7) / 10, tenant=doc["tenant"]).body
            body = body.model_copy(update={"trace_id": doc["body"]["trace_id"]})
            _, raw, headers = score_record(body)
            out.append((_Record(f"{topic}.scores", 0, i, raw, headers), "score"))
    return out


def bench_sampler(url: str, redis_url: str, n: int, reps: int) -> dict[str, float]:
    """Decode and process timed batch by batch in the same loop, so both see the same machine load."""
    client = redis.Redis.from_url(redis_url)
    config = ReviewConfig(blind_rate=0.01, capacity_per_day=1_000_000)
    rates: dict[str, list[float]] = {"total": [], "decode": [], "process": []}
    for rep in range(reps):
        records = sampler_records(n, f"bench{rep}")
        store = QueueStore(url, config, "config-bench")
        store.migrate()
        proc = ReviewProcessor(config, ReviewMetrics(CollectorRegistry()), client, store)
        decode_s = process_s = 0.0
        for i in range(0, len(records), BATCH):
            t0 = time.perf_counter()
            events = [decode_record(r, kind) for r, kind in records[i:i + BATCH]]
            t1 = time.perf_counter()
            proc.process(events)  # type: ignore[arg-type]
            t2 = time.perf_counter()
            decode_s, process_s = decode_s + t1 - t0, process_s + t2 - t1
        rates["total"].append(n / (decode_s + process_s))
        rates["decode"].append(n / decode_s)
        rates["process"].append(n / process_s)
        proc.close()
    client.close()
    return {"traces_per_s": median(rates["total"]), "decode_only_per_s": median(rates["decode"]),
            "process_only_per_s": median(rates["process"])}


_FILL = """
INSERT INTO review_item (tenant, trace_id, stratum, reason, inclusion_probability, queued_day, trace_timestamp,
    variant, content, faithfulness_score, faithfulness_threshold, faithfulness_outcome, reviews_wanted)
SELECT 'acme', 'bench-' || g, 'blind', 'random', 0.01, current_date, now(), 'production',
    jsonb_build_object('trace_id', 'bench-' || g, 'query', 'How do I rotate the API key of project ' || g || '?',
        'answer', repeat('Rotate the key in Settings, then update every client. ', 6),
        'citations', jsonb_build_array('doc-a-' || g),
        'documents', jsonb_build_array(
            jsonb_build_object('id', 'doc-a-' || g, 'text', repeat('Keys are rotated under Settings. ', 20)),
            jsonb_build_object('id', 'doc-b-' || g, 'text', repeat('Old keys stop working after a day. ', 20)),
            jsonb_build_object('id', 'doc-c-' || g, 'text', repeat('Clients read the key at start. ', 20))),
        'candidates', '[]'::jsonb, 'sample_rate', 1.0, 'refused', false),
    random(), 0.5, 'scored', 1
FROM generate_series(1, %s) AS g
"""


def fill_queue(url: str, items: int) -> float:
    started = time.perf_counter()
    with reviewdb.connect(url) as conn:
        reviewdb.migrate(conn)
        for start in range(0, items, 100_000):
            conn.execute(_FILL.replace("generate_series(1, %s)", f"generate_series({start + 1}, {start + min(100_000, items - start)})"))
        conn.execute("INSERT INTO review_tenant_stats (tenant, queued) VALUES ('acme', %s)", (items,))
        conn.execute("ANALYZE review_item")
    return time.perf_counter() - started


def bench_page(url: str, bootstrap: str, redis_url: str, rounds: int) -> dict[str, float]:
    api = RunningApi(review_settings(bootstrap, redis_url, f"b{uuid.uuid4().hex[:8]}", url)).start()
    auth = {"Authorization": f"Bearer {ANN_KEY}"}
    timings: dict[str, list[float]] = {"next": [], "render": [], "save": [], "healthz": []}
    try:
        with httpx.Client(base_url=api.url, headers=auth, timeout=30) as client:
            for _ in range(rounds):
                t0 = time.perf_counter()
                claimed = client.get("/review/next")
                t1 = time.perf_counter()
                page = client.get(claimed.headers["location"])
                t2 = time.perf_counter()
                saved = client.post(claimed.headers["location"] + "/label",
                                    data={"faithful": "yes", "csrf_token": csrf_of(page.text), "action": "save_next"})
                t3 = time.perf_counter()
                client.get("/healthz")
                t4 = time.perf_counter()
                assert page.status_code == 200 and saved.status_code == 303, (page.status_code, saved.text)
                for name, value in zip(timings, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                    timings[name].append(value * 1000)
    finally:
        api.stop()
    out = {}
    for name, values in timings.items():
        warm = values[5:]
        out[f"{name}_median_ms"] = median(warm)
        out[f"{name}_p95_ms"] = percentile(warm, 95)
    return out


def report_body(args: argparse.Namespace, sampler: dict[str, float], fill_s: float, page: dict[str, float]) -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"""Load average at the end (1, 5, 15 min): {load}; timings scale with it on a shared machine.

## Sampler (one process, decode included, real Redis and PostgreSQL)

{args.traces:,} simulator traces plus one faithfulness score per ten traces, batches of {BATCH}, median of {args.reps}.

| measure | value |
|---|---|
| traces/s, decode + sample + store | {sampler['traces_per_s']:,.0f} (target 5,000) |
| traces/s, sample + store only (Redis + PostgreSQL) | {sampler['process_only_per_s']:,.0f} |
| reference: the runtime's decode alone, traces/s | {sampler['decode_only_per_s']:,.0f} |
| share of the time spent decoding | {sampler['traces_per_s'] / sampler['decode_only_per_s']:.0%} |

## Review page with {args.items:,} items queued (filled in {fill_s:.0f} s)

HTTP on loopback, one reviewer, {args.rounds - 5} rounds after 5 warm-up rounds; times in ms.

| request | median | p95 |
|---|---|---|
| GET /review/next (claim the next item) | {page['next_median_ms']:.1f} | {page['next_p95_ms']:.1f} |
| GET /review/items/ID (render; target < 50) | {page['render_median_ms']:.1f} | {page['render_p95_ms']:.1f} |
| POST label (save, outbox, save and next) | {page['save_median_ms']:.1f} | {page['save_p95_ms']:.1f} |
| reference: GET /healthz | {page['healthz_median_ms']:.1f} | {page['healthz_p95_ms']:.1f} |
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--traces", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=105)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragmon-bench-review-"))
    pg = start_postgres(work, durable=False)
    rs = start_redis()
    broker = start_broker()
    try:
        sampler = bench_sampler(create_database(pg.extra["url"], "sampler"), f"redis://127.0.0.1:{rs.port}/0",
                                args.traces, args.reps)
        page_url = create_database(pg.extra["url"], "page")
        fill_s = fill_queue(page_url, args.items)
        page = bench_page(page_url, f"127.0.0.1:{broker.port}", f"redis://127.0.0.1:{rs.port}/0", args.rounds)
        print(sampler, page, flush=True)
    finally:
        broker.stop()
        rs.stop()
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)
    write_report("review", f"Review benchmark ({datetime.now(UTC):%Y-%m-%d})", report_body(args, sampler, fill_s, page),
                 args.out)


if __name__ == "__main__":
    main()
