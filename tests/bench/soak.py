"""Memory soak: the API and the metrics, exclusion and drift workers under steady traffic, RSS sampled.

The simulator's `clean` scenario (traces with exclusion samples and app
embeddings, feedback, labels, releases) is sent to one API process at a fixed
rate for `--seconds`; one process of each worker consumes it. Every 10 s the
resident set size of each process is sampled. Reported: RSS after the first
minute, at the end, and the largest, per process (growth after warm-up is the
signal, and the slope of a least-squares line through the second half's samples says whether it has
levelled off). Writes its table to --out.

    python tests/bench/soak.py --seconds 600 --rate 300 --out tests/bench/reports/soak.md
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path

import yaml

from service.local.embedded import free_port, start_broker, start_redis, wait_for_port
from service.simulate.run import run_send
from service.simulate.scenario import load_scenario
from service.simulate.sender import SendConfig
from tests.bench.common import ROOT, ragmon_argv, spawn, write_report
from tests.support.workers import WorkerProcess

WORK = ROOT / "tests" / "bench" / ".work"
WORKERS = ("metrics", "exclusion", "drift")
CONFIG = {"drift": {"encoder": {"enabled": False}, "app_embeddings": {"models": ["app-embed-v1"]}}}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def slope_mb_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of RSS against time (MiB per minute) over the second half of the run."""
    half = [(t, r) for t, r in points if t >= points[-1][0] / 2]
    if len(half) < 2:
        return float("nan")
    mean_t, mean_r = sum(t for t, _ in half) / len(half), sum(r for _, r in half) / len(half)
    spread = sum((t - mean_t) ** 2 for t, _ in half)
    return 60 * sum((t - mean_t) * (r - mean_r) for t, r in half) / spread if spread else float("nan")


def soak(seconds: int, rate: float) -> dict[str, list[tuple[float, float]]]:
    broker, redis_server = start_broker(), start_redis()
    config = WORK / "soak-config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(CONFIG))
    port, key = free_port(), "soak-key"
    env = {
        "RAGMON_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{broker.port}",
        "RAGMON_CONFIG": str(config),
        "RAGMON_REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "RAGMON_DEV_API_KEY": key,
        "RAGMON_DEV_TENANT": "soak",
        "PYTHONPATH": str(ROOT),
    }
    api = spawn(ragmon_argv("api", "--port", str(port), "--log-level", "warning"), env, WORK / "soak-api.log")
    workers: dict[str, WorkerProcess] = {}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ("api", *WORKERS)}
    try:
        wait_for_port("127.0.0.1", port, 60, api)
        for name in WORKERS:
            workers[name] = WorkerProcess(f"workers.{name}", env, WORK / f"soak-{name}.log")
        pids = {"api": api.pid} | {name: w.proc.pid for name, w in workers.items()}
        stop = threading.Event()
        started = time.monotonic()

        def sample() -> None:
            while not stop.wait(10.0):
                for name, pid in pids.items():
                    samples[name].append((time.monotonic() - started, rss_mb(pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        print(f"soaking for {seconds} s", flush=True)
        scenario = load_scenario("clean").with_overrides(duration_s=seconds, rate=rate)
        run_send(
            scenario, SendConfig(api=f"http://127.0.0.1:{port}", default_key=key, senders=2), keep_truth=False
        )
        stop.set()
        sampler.join()
    finally:
        for w in workers.values():
            w.terminate()
        api.terminate()
        api.wait(15)
        redis_server.stop()
        broker.stop()
    return samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--rate", type=float, default=300.0, help="simulated requests per second")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what was started (finally) on SIGTERM
    samples = soak(args.seconds, args.rate)
    rows, minutes = [], []
    for name, points in samples.items():
        after_warmup = next((rss for t, rss in points if t >= 60), points[0][1])
        rows.append(
            f"| {name} | {after_warmup:,.0f} | {points[-1][1]:,.0f} | {max(r for _, r in points):,.0f} | "
            f"{points[-1][1] - after_warmup:+,.0f} | {slope_mb_per_min(points):+.2f} |"
        )
        per_minute = [rss for i, (_, rss) in enumerate(points) if i % 6 == 5]
        minutes.append(f"| {name} | {' '.join(f'{r:.0f}' for r in per_minute)} |")
    body = f"""`python tests/bench/soak.py --seconds {args.seconds} --rate {args.rate:g}` — the `clean` scenario sent to one
API process for {args.seconds} s at {args.rate:g} requests/s; one process each of the metrics, exclusion and drift
(app embeddings) workers. Resident set size sampled every 10 s (MiB):

| process | after 1 min | at the end | largest | end − after 1 min | slope, second half (MiB/min) |
|---|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

RSS at the end of each minute (MiB), to tell a warm-up that levels off from growth:

| process | minute 1, 2, … |
|---|---|
{chr(10).join(minutes)}
"""
    write_report("soak", "Memory soak", body, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
