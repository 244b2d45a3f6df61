"""End-to-end worker benchmarks: record bytes in Kafka -> commit, one process, by stage.

Each run is one `tests/bench/e2e_runner.py` process running the worker's real
runtime loop against a private Tansu broker and redis-server until every
preloaded record is committed (decode, dedupe keys, the processor's Redis
work, commit all included). The headline is records per second of the
runtime's handle() (record bytes -> commit); the fetch from the broker is
timed as a stage of its own. The reference is the same runner on the tree of
another git revision (`git archive`, e.g. the code before a change), and the
two take turns within each repeat so a neighbour's load slows both alike.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import redis
import yaml
from kafka import KafkaProducer

from service.contracts import Topics
from service.contracts.kafka import ensure_topics
from service.contracts.settings import CommonSettings
from service.local.embedded import start_broker, start_redis
from tests.bench.common import ROOT, child_report, median

WORK = ROOT / "tests" / "bench" / ".work"
RUNNER = ROOT / "tests" / "bench" / "e2e_runner.py"
PROFILE_STAGES = ("decode", "dedupe", "process", "emit", "mark_done", "commit")


@dataclass
class Workload:
    worker: str
    records: list[tuple[str, bytes | None, bytes]]  # (event type, key, stored record value)
    config: dict[str, Any] = field(default_factory=dict)  # the RAGMON_CONFIG file's sections
    # Called before each run for variables of that run alone (e.g. a fresh, empty database)
    run_env: Callable[[], dict[str, str]] | None = None


def reference_tree(rev: str) -> Path:
    """The repository at `rev`, unpacked once under tests/bench/.work (git archive: tracked files only)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = WORK / f"reference-{sha}"
    if not (tree / "workers").is_dir():
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
    return tree


def _preload(bootstrap: str, prefix: str, records: list[tuple[str, bytes | None, bytes]]) -> None:
    ensure_topics(
        CommonSettings(kafka_bootstrap_servers=bootstrap, kafka_topic_prefix=prefix, kafka_partitions=4)
    )
    topics = Topics(prefix)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type="lz4",
        linger_ms=5,
        batch_size=512 * 1024,
        max_request_size=16 * 1024 * 1024,
    )
    for event_type, key, value in records:
        producer.send(topics.for_event(event_type), key=key, value=value)
    producer.flush()
    producer.close()


def _one_run(tree: Path, workload: Workload, env: dict[str, str]) -> dict[str, Any]:
    redis.Redis.from_url(env["RAGMON_REDIS_URL"]).flushdb()  # done-keys and state of the previous run
    fresh = workload.run_env() if workload.run_env else {}
    env = {
        **os.environ,
        **env,
        **fresh,
        "PYTHONPATH": str(tree),
        "RAGMON_WORKER_GROUP_ID": f"bench-{uuid.uuid4().hex[:8]}",
    }
    out = child_report(
        [sys.executable, str(RUNNER), "--worker", workload.worker, "--count", str(len(workload.records))],
        tree,
        env,
        900,
        workload.worker,
    )
    if out["records"] != len(workload.records):
        raise RuntimeError(f"{workload.worker} committed {out['records']} of {len(workload.records)} records")
    return out


def measure(workload: Workload, repeats: int, reference: str | None) -> dict[str, list[dict[str, Any]]]:
    """{"change": runs, "reference": runs}: the two paths take turns within each repeat."""
    trees = {"change": ROOT} | ({"reference": reference_tree(reference)} if reference else {})
    broker, redis_server = start_broker(), start_redis()
    bootstrap = f"127.0.0.1:{broker.port}"
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    runs: dict[str, list[dict[str, Any]]] = {path: [] for path in trees}
    try:
        _preload(bootstrap, prefix, workload.records)
        WORK.mkdir(parents=True, exist_ok=True)  # a run without a reference tree has not made it
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False, dir=WORK) as config:
            yaml.safe_dump(workload.config, config)
        env = {
            "RAGMON_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "RAGMON_KAFKA_TOPIC_PREFIX": prefix,
            "RAGMON_REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
            "RAGMON_CONFIG": config.name,
            "RAGMON_WORKER_MAX_BATCH": "500",
        }
        for _ in range(repeats):
            for path, tree in trees.items():
                runs[path].append(_one_run(tree, workload, env))
    finally:
        redis_server.stop()
        broker.stop()
        Path(config.name).unlink(missing_ok=True)
    return runs


def rate(run: dict[str, Any], clock: str, *stages: str) -> float:
    return float(run["records"] / sum(run[clock][s] for s in stages))


def summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over repeats: records/s end to end (wall, CPU), with the fetch, µs per record by stage."""
    out = {
        "e2e": median([rate(r, "wall", "end_to_end") for r in runs]),
        "e2e_cpu": median([rate(r, "cpu", "end_to_end") for r in runs]),
        "with_fetch": median([rate(r, "wall", "end_to_end", "fetch") for r in runs]),
        "with_fetch_cpu": median([rate(r, "cpu", "end_to_end", "fetch") for r in runs]),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
    }
    for clock in ("wall", "cpu"):
        for stage in (*PROFILE_STAGES, "fetch", "end_to_end"):
            out[f"{clock}:{stage}"] = median([r[clock][stage] / r["records"] * 1e6 for r in runs])
        out[f"{clock}:runtime"] = out[f"{clock}:end_to_end"] - sum(
            out[f"{clock}:{s}"] for s in PROFILE_STAGES
        )
    return out


def profile_table(results: dict[str, dict[str, float]], unit: str = "record") -> str:
    """Per-stage µs per record, CPU time of the worker process (wall clock in brackets)."""
    paths = list(results)
    head = "| stage | " + " | ".join(f"{p}: µs/{unit} CPU (wall)" for p in paths) + " |"
    lines = [head, "|---|" + "---:|" * len(paths)]
    labels = {
        "decode": "decode (record bytes -> typed body)",
        "dedupe": "dedupe (MGET done-keys)",
        "process": "process (the worker's logic and its Redis work)",
        "emit": "emit (wait for acks)",
        "mark_done": "mark done (done-keys)",
        "commit": "commit (offsets)",
        "runtime": "runtime bookkeeping (metrics, DLQ limit)",
        "end_to_end": "**end to end**",
        "fetch": "fetch from the broker (not in end to end)",
    }
    for stage in (*PROFILE_STAGES, "runtime", "end_to_end", "fetch"):
        cells = [f"{results[p]['cpu:' + stage]:,.1f} ({results[p]['wall:' + stage]:,.1f})" for p in paths]
        lines.append(f"| {labels[stage]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def headline_table(results: dict[str, dict[str, float]], unit: str = "records") -> str:
    lines = [
        f"| path | {unit}/s end to end, wall | per CPU-second | with the fetch, wall | per CPU-second | "
        "peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for path, r in results.items():
        lines.append(
            f"| {path} | {r['e2e']:,.0f} | {r['e2e_cpu']:,.0f} | {r['with_fetch']:,.0f} | "
            f"{r['with_fetch_cpu']:,.0f} | {r['peak_rss_mb']:,.0f} |"
        )
    return "\n".join(lines)


def ratio_line(results: dict[str, dict[str, float]]) -> str:
    if "reference" not in results:
        return "No reference measured (pass --reference REV)."
    c, r = results["change"], results["reference"]
    return (
        f"Change / reference, same run: **{c['e2e'] / r['e2e']:.2f}×** end to end (wall), "
        f"{c['e2e_cpu'] / r['e2e_cpu']:.2f}× (CPU), {c['with_fetch'] / r['with_fetch']:.2f}× with the fetch; "
        f"decode {r['cpu:decode'] / max(c['cpu:decode'], 1e-9):.1f}× faster (CPU)."
    )
