"""Active series per tenant and what they cost Prometheus (docs/series-budget.md, issue #31).

1. The metrics worker's processor, in process against a real Redis, runs 30 simulated days of the
   series scenario (tests/support/series.py: weekly releases, every intent, candidates coming and
   going, feedback of every kind) for a few tenants and one tenant sending garbage labels; the series
   each tenant costs are counted per day, per family and per label at the defaults. Reference in the
   same run: the same days with windows longer than the run (every release and candidate stays, as
   before the windowed caps).
2. Every other worker (exclusion, drift, shadow, faithfulness), in process against the same Redis, over
   the same days of WorkersScenario (the same tenants, releases, intents and candidates; the drivers of
   tests/support/series.py): series per tenant, per worker and family, day 0 and the last day.
3. Bytes per series: a real Prometheus (/usr/bin/prometheus, free port, stopped by PID) scrapes a
   synthetic exposition of N series labelled like ragmon's, at two N; the slope of its resident memory
   and Go heap in use over prometheus_tsdb_head_series is the cost of one more active series.

Usage: python -m tests.bench.bench_series [--tenants 3] [--days 30] [--small 20000] [--large 120000]
[--reps 2] [--out PATH]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import redis
import yaml
from prometheus_client import CollectorRegistry

from service.local.embedded import free_port, spawn_child, start_redis, wait_for_port
from tests.bench.common import ROOT, median, write_report
from tests.support.series import (
    MetricsScenario,
    WorkersScenario,
    label_values,
    other_workers,
    series_by_family,
    tiny_hhem_checkpoint,
)
from workers.metrics.config import MetricsConfig, ModelPrice
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor

PRICES = {"gpt-x": ModelPrice(prompt=1.0, completion=2.0, cached_prompt=0.5)}
MONTH = 60 * 86400.0
UNBOUNDED = {"release_window_s": MONTH, "variant_window_s": MONTH, "max_releases_per_tenant": 200}
SHOWN_DAYS = (0, 1, 7, 8, 14, 21, 30)
TENANT_COUNTS = (100, 1_000, 10_000)


def simulate(client: redis.Redis, tenants: list[str], days: int, **config: Any) -> dict[str, Any]:
    client.flushdb()
    scenario = MetricsScenario(tenants, hostile=["hostile"])
    registry = CollectorRegistry()
    proc = MetricsProcessor(
        MetricsConfig(prices=PRICES, **config), MetricsWorkerMetrics(registry), client, clock=scenario.clock
    )
    daily: list[dict[str, int]] = []
    families: dict[int, dict[str, int]] = {}
    started = time.monotonic()
    for day in range(days + 1):
        scenario.run_day(proc, day)
        daily.append({t: sum(series_by_family(registry, t).values()) for t in [*tenants, "hostile"]})
        if day in (0, days):
            families[day] = series_by_family(registry, tenants[0])
    return {
        "daily": daily,
        "families": families,
        "labels": label_values(registry, tenants[0]),
        "seconds": time.monotonic() - started,
    }


def simulate_workers(client: redis.Redis, tenants: list[str], days: int, model_dir: str) -> dict[str, Any]:
    """The other workers over the same days: per worker, per day, tenant -> series; families of tenant-0."""
    client.flushdb()
    scenario = WorkersScenario(tenants, hostile=["hostile"])
    drivers = other_workers(client, scenario, model_dir)
    daily: dict[str, list[dict[str, int]]] = {d.name: [] for d in drivers}
    families: dict[str, dict[int, dict[str, int]]] = {d.name: {} for d in drivers}
    labels: dict[str, dict[str, set[str]]] = {}
    started = time.monotonic()
    for day in range(days + 1):
        scenario.run_day(drivers, day)
        for d in drivers:
            daily[d.name].append(
                {t: sum(series_by_family(d.registry, t).values()) for t in [*tenants, "hostile"]}
            )
            if day in (0, days):
                families[d.name][day] = series_by_family(d.registry, tenants[0])
    for d in drivers:
        labels[d.name] = label_values(d.registry, tenants[0])
    return {"daily": daily, "families": families, "labels": labels, "seconds": time.monotonic() - started}


def exposition(n: int, step: int) -> bytes:
    """N series over 40 families, labelled like ragmon's (tenant, variant, release, intent, kind)."""
    lines = []
    for i in range(n):
        f, rest = i % 40, i // 40
        lines.append(
            f'ragmon_bench_family{f}_total{{tenant="tenant-{rest % 1000:04d}",variant="cand-{rest // 1000 % 8}",'
            f'release="r{rest // 8000}",intent="troubleshooting",kind="thumbs"}} {step + i % 7}'
        )
    return ("\n".join(lines) + "\n").encode()


class Exposition:
    def __init__(self, n: int) -> None:
        self.n, self.step = n, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                outer.step += 1
                body = exposition(outer.n, outer.step)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _own_metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    wanted = ("prometheus_tsdb_head_series", "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes")
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            out[name] = float(value)
    return out


def prometheus_memory(binary: str, n: int, work: Path) -> dict[str, float]:
    """One fresh Prometheus scraping N series every second: its memory once the head holds them all
    and 15 more scrapes went in (median of 5 reads a second apart)."""
    target = Exposition(n)
    port = free_port()
    config = work / f"prometheus-{n}.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s"},
                "scrape_configs": [
                    {"job_name": "bench", "static_configs": [{"targets": [f"127.0.0.1:{target.port}"]}]}
                ],
            }
        )
    )
    argv = [
        binary,
        f"--config.file={config}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.path={work / f'data-{n}-{time.time_ns()}'}",
        "--storage.tsdb.retention.time=1h",
    ]
    child = spawn_child(f"prometheus-{n}", argv, work / "logs", port)
    try:
        wait_for_port("127.0.0.1", port, 30, child.proc)
        deadline = time.monotonic() + 120
        while _own_metrics(port).get("prometheus_tsdb_head_series", 0) < n and time.monotonic() < deadline:
            time.sleep(1)
        first = target.step
        while target.step < first + 15 and time.monotonic() < deadline:
            time.sleep(1)
        reads = []
        for _ in range(5):
            reads.append(_own_metrics(port))
            time.sleep(1)
        return {k: median([r[k] for r in reads]) for k in reads[0]}
    finally:
        child.stop()
        target.close()


def bytes_per_series(small: int, large: int, reps: int) -> dict[str, Any]:
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    work = Path(tempfile.mkdtemp(prefix="bench-series-", dir=ROOT / "tests" / "bench"))
    runs: dict[int, list[dict[str, float]]] = {small: [], large: []}
    try:
        for _ in range(reps):  # interleaved: both sizes see the same machine noise
            for n in (small, large):
                runs[n].append(prometheus_memory(binary, n, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {n: {k: median([r[k] for r in rs]) for k in rs[0]} for n, rs in runs.items()}
    head = med[large]["prometheus_tsdb_head_series"] - med[small]["prometheus_tsdb_head_series"]
    return {
        "runs": runs,
        "median": med,
        "rss": (med[large]["process_resident_memory_bytes"] - med[small]["process_resident_memory_bytes"])
        / head,
        "heap": (med[large]["go_memstats_heap_inuse_bytes"] - med[small]["go_memstats_heap_inuse_bytes"])
        / head,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tenants", type=int, default=3)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--small", type=int, default=20_000)
    ap.add_argument("--large", type=int, default=120_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tenants = [f"tenant-{i}" for i in range(args.tenants)]
    server = start_redis()
    try:
        client = redis.Redis(port=server.port)
        bounded = simulate(client, tenants, args.days)
        reference = simulate(client, tenants, args.days, **UNBOUNDED)
        hhem = Path(tempfile.mkdtemp(prefix="bench-series-hhem-", dir=ROOT / "tests" / "bench"))
        try:
            workers = simulate_workers(client, tenants, args.days, tiny_hhem_checkpoint(hhem))
        finally:
            shutil.rmtree(hhem, ignore_errors=True)
    finally:
        server.stop()
    memory = bytes_per_series(args.small, args.large, args.reps)
    write_report(
        "series_budget",
        "Series per tenant and Prometheus memory",
        _report(args, bounded, reference, memory, workers),
        args.out,
    )
    return 0


def _steady(daily: list[dict[str, int]], tenant: str) -> int:
    return max(d[tenant] for d in daily[8:])


def _workers_section(
    args: argparse.Namespace, metrics_daily: list[dict[str, int]], workers: dict[str, Any]
) -> list[str]:
    t0, days = "tenant-0", args.days
    lines = [
        "## Every worker, series of one tenant",
        "",
        "The metrics worker as above; the exclusion, drift, shadow and faithfulness workers' processors over "
        "the same days of WorkersScenario (tests/support/series.py): labelled exclusion samples with the "
        "trace's release, the app's own query embeddings (encoder off) in sessions, production and its "
        "candidates as shadow twins, every answer scored by a tiny HHEM-architecture checkpoint (random "
        "weights, sample_rate 1.0). One replica of each worker.",
        "",
        f"| worker | day 0 | peak of the first week | peak days 8-{days} | ratio | day {days} | hostile tenant, peak |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = {"metrics": metrics_daily, **workers["daily"]}
    total = {"day0": 0, "first": 0, "steady": 0, "last": 0, "hostile": 0}
    for name, daily in rows.items():
        first, steady = max(d[t0] for d in daily[:8]), max(d[t0] for d in daily[8:])
        hostile = max(d["hostile"] for d in daily)
        lines.append(
            f"| {name} | {daily[0][t0]:,} | {first:,} | {steady:,} | {steady / first:.3f} | {daily[days][t0]:,} "
            f"| {hostile:,} |"
        )
        for k, v in (
            ("day0", daily[0][t0]),
            ("first", first),
            ("steady", steady),
            ("last", daily[days][t0]),
            ("hostile", hostile),
        ):
            total[k] += v
    lines += [
        f"| **total per tenant** | **{total['day0']:,}** | {total['first']:,} | **{total['steady']:,}** | "
        f"{total['steady'] / total['first']:.3f} | {total['last']:,} | {total['hostile']:,} |",
        "",
        "(Totals of per-worker peaks: an upper bound of the tenant's peak on any one day.) "
        f"Simulation time of the other workers: {workers['seconds']:.1f} s.",
        "",
        f"### Per worker and family, tenant-0 (day 0 and day {days})",
        "",
        f"| worker | family | day 0 | day {days} |",
        "|---|---|---:|---:|",
    ]
    for name, fams in workers["families"].items():
        f0, fn = fams[0], fams[days]
        for fam in sorted(set(f0) | set(fn), key=lambda n: (-fn.get(n, 0), n)):
            lines.append(f"| {name} | `{fam}` | {f0.get(fam, 0)} | {fn.get(fam, 0)} |")
    lines += [
        "",
        f"### Label values of tenant-0 at day {days}, other workers",
        "",
        "| worker | label | values | distinct |",
        "|---|---|---|---:|",
    ]
    for name, by_label in workers["labels"].items():
        for label, values in sorted(by_label.items()):
            shown_values = ", ".join(sorted(values)[:10]) + (" …" if len(values) > 10 else "")
            lines.append(f"| {name} | `{label}` | {shown_values} | {len(values)} |")
    lines.append("")
    return lines


def _report(
    args: argparse.Namespace,
    bounded: dict[str, Any],
    reference: dict[str, Any],
    memory: dict[str, Any],
    workers: dict[str, Any],
) -> str:
    t0 = "tenant-0"
    days = args.days
    bd, rd = bounded["daily"], reference["daily"]
    shown = [d for d in SHOWN_DAYS if d <= days]
    steady = _steady(bd, t0)
    first_week = max(d[t0] for d in bd[:8])
    lines = [
        "Command: `PYTHONPATH=. .venv/bin/python -m tests.bench.bench_series` "
        f"(--tenants {args.tenants} --days {days} --small {args.small} --large {args.large} --reps {args.reps}).",
        "",
        "The metrics worker's processor, in process against a real Redis, over simulated days of the series "
        "scenario (tests/support/series.py) at the default config; the reference is the same run with "
        "windows longer than the run (every release and candidate kept, the registry before issue #31). "
        "Series = samples exported with the tenant's label (each histogram bucket, _sum and _count is one).",
        "",
        "## Series per tenant, by simulated day",
        "",
        "| day | tenant-0 (windowed caps) | hostile tenant (windowed caps) | tenant-0 (reference: no window) | ratio |",
        "|---:|---:|---:|---:|---:|",
    ]
    for d in shown:
        lines.append(
            f"| {d} | {bd[d][t0]} | {bd[d]['hostile']} | {rd[d][t0]} | {rd[d][t0] / bd[d][t0]:.2f} |"
        )
    others = sorted({d[t] for d in bd for t in d if t.startswith("tenant-")})
    lines += [
        "",
        f"- tenant-0 at the end of day 0 (defaults): **{bd[0][t0]}** series; first week's peak {first_week}; "
        f"peak over days 8-{days}: **{steady}** ({steady / first_week:.3f} of the first week's peak).",
        f"- the reference's tenant-0 at day {days}: {rd[days][t0]} series ({rd[days][t0] / bd[days][t0]:.2f}x).",
        f"- every scenario tenant, every day: {min(others)} to {max(others)} series; the hostile tenant "
        f"(a fresh variant, release, intent and model on every trace): at most {max(d['hostile'] for d in bd)}.",
        f"- simulation time: {bounded['seconds']:.1f} s (windowed), {reference['seconds']:.1f} s (reference).",
        "",
        f"## Per family, tenant-0 (day 0 and day {days})",
        "",
        "| family | day 0 | day " + str(days) + " |",
        "|---|---:|---:|",
    ]
    fam0, famn = bounded["families"][0], bounded["families"][days]
    for name in sorted(set(fam0) | set(famn), key=lambda n: -famn.get(n, 0)):
        lines.append(f"| `{name}` | {fam0.get(name, 0)} | {famn.get(name, 0)} |")
    lines += [
        "",
        f"## Label values of tenant-0 at day {days}",
        "",
        "| label | values | distinct |",
        "|---|---|---:|",
    ]
    for label, values in sorted(bounded["labels"].items()):
        shown_values = ", ".join(sorted(values)[:12]) + (" …" if len(values) > 12 else "")
        lines.append(f"| `{label}` | {shown_values} | {len(values)} |")
    lines += ["", *_workers_section(args, bd, workers)]
    med = memory["median"]
    lines += [
        "",
        "## Bytes per series (real Prometheus)",
        "",
        f"`{shutil.which('prometheus') or '/usr/bin/prometheus'}` scraping a synthetic exposition every 1 s "
        "(5 labels like ragmon's, 40 families), one fresh process per size, read once the head holds every "
        f"series and 15 more scrapes went in (median of 5 reads); {args.reps} interleaved repetitions, medians.",
        "",
        "| N series | head series | resident memory | Go heap in use |",
        "|---:|---:|---:|---:|",
    ]
    for n, m in med.items():
        lines.append(
            f"| {n} | {m['prometheus_tsdb_head_series']:.0f} | {m['process_resident_memory_bytes'] / 2**20:.1f} MiB "
            f"| {m['go_memstats_heap_inuse_bytes'] / 2**20:.1f} MiB |"
        )
    rss, heap = memory["rss"], memory["heap"]
    per = max(rss, heap)
    lines += [
        "",
        f"Slope: **{rss:.0f} bytes of resident memory** and {heap:.0f} bytes of Go heap per active series. "
        f"The projection uses {per:.0f} bytes (the larger).",
        "",
        "## Projection (metrics worker's series, one replica exporting every tenant)",
        "",
        f"Per tenant: {bd[0][t0]} series at the defaults (day 0), {steady} at the steady state (peak after the first "
        f"week); reference without windows at day {days}: {rd[days][t0]}. Each metrics-worker replica exports the "
        "series of the tenants whose events it consumed: multiply by the replicas.",
        "",
        "| tenants | series (steady) | Prometheus memory | series, no window, day "
        + str(days)
        + " | memory, no window |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n in TENANT_COUNTS:
        s, r = n * steady, n * rd[days][t0]
        lines.append(f"| {n:,} | {s:,} | {s * per / 2**30:.2f} GiB | {r:,} | {r * per / 2**30:.2f} GiB |")
    every = sum(max(d[t0] for d in daily[8:]) for daily in [bd, *workers["daily"].values()])
    lines += [
        "",
        "## Projection (every worker: metrics, exclusion, drift, shadow, faithfulness; one replica each)",
        "",
        f"Per tenant at the steady state: {every:,} series (the sum of each worker's peak after the first week).",
        "",
        "| tenants | series (steady, every worker) | Prometheus memory |",
        "|---:|---:|---:|",
    ]
    for n in TENANT_COUNTS:
        lines.append(f"| {n:,} | {n * every:,} | {n * every * per / 2**30:.2f} GiB |")
    lines += [
        "",
        "Not counted: the probes worker's and the API's series, the pinned encoder's drift signal (off here), "
        "and Prometheus's churn and query memory; see docs/series-budget.md.",
        "",
        f"Raw Prometheus reads: {memory['runs']}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
