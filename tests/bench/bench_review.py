"""Review benchmark (issue 16): the sampler's throughput, and the review page with a million queued items.

1. Sampler, end to end: the simulator's traces (and one faithfulness score
   per ten traces, as the scorer would emit them) are produced to a private
   Tansu broker as the API and the scorer store them; one review-worker
   process runs its real runtime loop on them, from the record bytes to the
   commit (decode, dedupe, the sampler's Redis pipeline, the PostgreSQL
   transaction, commit), timed by stage (tests/bench/e2e.py). Each run gets a
   fresh, empty database. The reference is the same runner on another git
   revision (--reference), taking turns within each repeat.
2. Page: the queue filled with `--items` items (one tenant), then a reviewer
   asks for the next item, renders it and saves a label, over HTTP on
   loopback (an upper bound of the server-side time). Reference: GET /healthz.
   `--items 0` skips it and keeps the page section of the previous report.
Usage: python tests/bench/bench_review.py [--traces 20000] [--reference REV] [--items 1000000] [--out PATH]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import orjson

from service.contracts import reviewdb
from service.contracts.scores import score_record
from service.local.embedded import start_broker, start_redis
from service.local.postgres import create_database, start_postgres
from tests.bench import e2e
from tests.bench.bench_metrics_worker import stored_records
from tests.bench.common import ROOT, median, percentile, write_report
from tests.service.api.api_harness import RunningApi
from tests.service.review.review_harness import ANN_KEY, csrf_of, review_settings
from tests.workers.review.helpers import faithfulness_event

TARGET_PER_S = 5_000
REPORT = ROOT / "tests" / "bench" / "reports" / "review.md"


def sampler_records(n: int) -> list[tuple[str, bytes | None, bytes]]:
    """n simulator traces as stored by the API, and after every tenth its faithfulness score record."""
    traces = [(k, v) for t, k, v in stored_records(n * 4) if t == "trace"][:n]
    if len(traces) < n:
        raise RuntimeError(f"the simulator gave {len(traces)} traces, fewer than {n}")
    out: list[tuple[str, bytes | None, bytes]] = []
    for i, (key, value) in enumerate(traces):
        out.append(("trace", key, value))
        if i % 10 == 0:
            doc = orjson.loads(value)
            body = faithfulness_event(0, 0.3 + (i % 7) / 10, tenant=doc["tenant"]).body
            body = body.model_copy(
                update={"trace_id": doc["body"]["trace_id"], "request_id": doc["body"]["request_id"]}
            )
            score_key, raw, _ = score_record(body)
            out.append(("score", score_key, raw))
    return out


def bench_sampler(
    admin_url: str, n: int, repeats: int, reference: str | None
) -> tuple[dict[str, dict[str, float]], int]:
    records = sampler_records(n)
    names = (f"sampler{k}" for k in itertools.count())

    def fresh_database() -> dict[str, str]:
        url = create_database(admin_url, next(names))
        with reviewdb.connect(url) as conn:
            reviewdb.migrate(conn)
        return {"RAGMON_DATABASE_URL": url}

    config = {"review": {"blind_rate": 0.01, "capacity_per_day": 1_000_000}}
    runs = e2e.measure(e2e.Workload("review", records, config, fresh_database), repeats, reference)
    return {path: e2e.summary(path_runs) for path, path_runs in runs.items()}, len(records)


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
            conn.execute(
                _FILL.replace(
                    "generate_series(1, %s)",
                    f"generate_series({start + 1}, {start + min(100_000, items - start)})",
                )
            )
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
                saved = client.post(
                    claimed.headers["location"] + "/label",
                    data={"faithful": "yes", "csrf_token": csrf_of(page.text), "action": "save_next"},
                )
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


def sampler_section(
    args: argparse.Namespace, results: dict[str, dict[str, float]], n_records: int, load: tuple[float, float]
) -> str:
    per_trace = n_records / args.traces  # records consumed per trace (traces and their scores)
    change = results["change"]
    traces_cpu, traces_wall = change["e2e_cpu"] / per_trace, change["e2e"] / per_trace
    verdict = "meets" if traces_cpu >= TARGET_PER_S else "MISSES"
    rows = [
        "| path | traces/s end to end, wall | per CPU-second | records/s, wall | per CPU-second | "
        "peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for path, r in results.items():
        rows.append(
            f"| {path} | {r['e2e'] / per_trace:,.0f} | {r['e2e_cpu'] / per_trace:,.0f} | {r['e2e']:,.0f} | "
            f"{r['e2e_cpu']:,.0f} | {r['peak_rss_mb']:,.0f} |"
        )
    table = "\n".join(rows)
    return f"""## Sampler: one process end to end (record bytes -> commit), real Kafka, Redis and PostgreSQL

`python tests/bench/bench_review.py --traces {args.traces} --reference {args.reference}` — {args.traces:,}
simulator traces (`clean` mix) and one faithfulness score per ten traces ({n_records:,} records), produced to a
private Tansu broker; one review-worker process runs its real runtime loop (batches of up to 500) until every
record is committed; a fresh database per run (blind rate 1%, capacity not limiting). Median of {args.repeats}
repeats; change and reference (`{args.reference}`) take turns within each repeat. 1-minute load average
{load[0]:.1f} before, {load[1]:.1f} after, on 2 shared cores: the per-CPU-second columns are what one process
sustains on a core of its own.

{table}

Target ≥ {TARGET_PER_S:,} traces/s per process (end to end, per CPU-second): **{verdict}**
({traces_cpu / TARGET_PER_S:.1f}× the target; {traces_wall / TARGET_PER_S:.1f}× on the wall clock of this loaded
machine). {e2e.ratio_line(results)}

### Where the time goes (µs per record, median over repeats)

{e2e.profile_table(results, "record")}

The change decodes traces and feedback once, with msgspec, into the sampler's views (workers/review/views.py:
the ids, query, documents' id/text/score, answer, citations, the exclusion sample's candidate ids and scores;
timings, usage, filters and all metadata skipped), stashes a run of consecutive traces in Redis with one script
call instead of three commands per trace, and writes a batch's items, quota, tenant counts and score totals to
PostgreSQL with one statement each (arrays through unnest, binary parameters) instead of five round trips per
queued item. Peak RSS is the largest of the runner processes' (the consumer's fetch buffers dominate it).
"""


def page_section(args: argparse.Namespace, fill_s: float, page: dict[str, float]) -> str:
    return f"""## Review page with {args.items:,} items queued (filled in {fill_s:.0f} s)

HTTP on loopback, one reviewer, {args.rounds - 5} rounds after 5 warm-up rounds; times in ms.

| request | median | p95 |
|---|---|---|
| GET /review/next (claim the next item) | {page["next_median_ms"]:.1f} | {page["next_p95_ms"]:.1f} |
| GET /review/items/ID (render; target < 50) | {page["render_median_ms"]:.1f} | {page["render_p95_ms"]:.1f} |
| POST label (save, outbox, save and next) | {page["save_median_ms"]:.1f} | {page["save_p95_ms"]:.1f} |
| reference: GET /healthz | {page["healthz_median_ms"]:.1f} | {page["healthz_p95_ms"]:.1f} |
"""


def previous_page_section() -> str:
    """The page section of the report on disk, when this run skips the page (--items 0)."""
    text = REPORT.read_text() if REPORT.exists() else ""
    match = re.search(r"^## Review page.*?(?=^## |\Z)", text, re.S | re.M)
    if not match:
        return "## Review page\n\nNot measured in this run (--items 0) and no earlier figures found.\n"
    dated = re.search(r"_Machine: .*?(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC", text)
    when = dated.group(1) if dated else "an earlier run"
    body = match.group(0).rstrip()
    if "Not re-measured" in body:
        return body + "\n"
    return (
        body + f"\n\nNot re-measured in this run (`--items 0`: filling a million items takes minutes on this "
        f"machine); these figures are from the run of {when} UTC, before the sampler changes, which do not "
        "touch the page.\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000, help="queue size for the page part; 0 skips it")
    ap.add_argument("--traces", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reference", default=None, help="git revision measured as the reference")
    ap.add_argument("--rounds", type=int, default=105)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    work = Path(tempfile.mkdtemp(prefix="ragmon-bench-review-"))
    pg = start_postgres(work, durable=False)
    try:
        load_before = os.getloadavg()[0]
        results, n_records = bench_sampler(pg.extra["url"], args.traces, args.repeats, args.reference)
        body = sampler_section(args, results, n_records, (load_before, os.getloadavg()[0]))
        print(results, flush=True)
        if args.items:
            rs, broker = start_redis(), start_broker()
            try:
                page_url = create_database(pg.extra["url"], "page")
                fill_s = fill_queue(page_url, args.items)
                page = bench_page(
                    page_url, f"127.0.0.1:{broker.port}", f"redis://127.0.0.1:{rs.port}/0", args.rounds
                )
            finally:
                broker.stop()
                rs.stop()
            body += "\n" + page_section(args, fill_s, page)
        else:
            body += "\n" + previous_page_section()
    finally:
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)
    write_report("review", f"Review benchmark ({datetime.now(UTC):%Y-%m-%d})", body, args.out)


if __name__ == "__main__":
    main()
