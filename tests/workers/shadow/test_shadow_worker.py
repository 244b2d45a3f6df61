"""The shadow worker as a real process on the test session's broker and Redis, killed with -9 midway."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from service.contracts import Topics
from service.contracts.scores import score_record
from tests.conftest import LOG_DIR
from tests.support.kafka import RecordWriter, stored, wait_until
from tests.support.workers import ROOT, WorkerProcess, wait_ready, worker_env
from tests.workers.shadow.shadow_events import score_body, trace_body

pytestmark = pytest.mark.slow
N = 300
CONFIG = {
    "shadow": {
        "recompute_every_pairs": 50,
        "recompute_every_s": 1,
        "min_pairs": 20,
        "resamples": 500,
        "expected_shadow_rate": {"cand-b": 1.0},
    }
}


@pytest.fixture
def env(
    kafka_bootstrap: str, redis_url: str, redis_client: redis.Redis, topic_prefix: str, tmp_path: Path
) -> dict[str, str]:
    config = tmp_path / "ragmon.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    return worker_env(kafka_bootstrap, redis_url, topic_prefix, config, RAGMON_WORKER_MAX_BATCH="25")


@pytest.fixture
def workers(env: dict[str, str], topic_prefix: str) -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for w in started:
        w.stop()


def _score(i: int, variant: str) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    return score_record(score_body(f"q{i}", variant, 0.9 if variant == "production" or i % 3 else 0.2))


def _send_all(kafka_bootstrap: str, topics: Topics) -> None:
    writer = RecordWriter(kafka_bootstrap, topics)
    try:
        for i in range(N):
            twins = [stored("trace", trace_body(f"q{i}")), stored("trace", trace_body(f"q{i}", "cand-b"))]
            for event in twins if i % 2 else twins[::-1]:  # half the candidates arrive first
                writer.send_event(event)
            for variant in ("production", "cand-b"):
                key, value, headers = _score(i, variant)
                writer.producer.send(topics.scores, key=key, value=value, headers=headers)
        writer.flush()
    finally:
        writer.close()


def test_kill9_midway_no_pair_lost_or_counted_twice(
    workers: list[WorkerProcess],
    env: dict[str, str],
    kafka_bootstrap: str,
    redis_client: redis.Redis,
    topic_prefix: str,
) -> None:
    topics = Topics(topic_prefix)
    first = WorkerProcess("workers.shadow", env, LOG_DIR / f"shadow-a-{topic_prefix}.log")
    workers.append(first)
    wait_ready(first)
    _send_all(kafka_bootstrap, topics)
    prefix = "ragmon:shadow:{acme}:"
    wait_until(
        lambda: int(redis_client.hget(prefix + "seen", "production") or 0) >= N // 4, 60, what="A busy"
    )
    first.kill9()
    second = WorkerProcess("workers.shadow", env, LOG_DIR / f"shadow-b-{topic_prefix}.log")
    workers.append(second)
    wait_ready(second)
    wait_until(lambda: int(redis_client.hget(prefix + "paired", "cand-b") or 0) >= N, 90, what="every pair")
    assert int(redis_client.hget(prefix + "paired", "cand-b")) == N
    assert {k.decode(): int(v) for k, v in redis_client.hgetall(prefix + "seen").items()} == {
        "production": N,
        "cand-b": N,
    }
    assert redis_client.zcard(prefix + "pairs:cand-b") == N
    wait_until(
        lambda: second.total("ragmon_shadow_window_pairs", candidate="cand-b") == N,
        60,
        what="a recompute over every pair",
    )
    outcomes = {b"trace:production", b"trace:cand-b", b"faith:production", b"faith:cand-b"}
    wait_until(
        lambda: all(outcomes <= set(redis_client.hkeys(f"{prefix}req:q{i}")) for i in range(N)),
        60,
        what="every score recorded",
    )
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "workers.shadow.cli",
            "report",
            "--tenant",
            "acme",
            "--candidate",
            "cand-b",
            "--format",
            "json",
            "--resamples",
            "500",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=True,
    )
    doc = json.loads(report.stdout)
    faithful = next(m for m in doc["metrics"] if m["metric"] == "faithful")
    assert (faithful["n"], faithful["losses"], faithful["wins"]) == (N, N // 3, 0)
    assert faithful["verdict"] == "worse"
    assert doc["context"]["coverage.coverage"] == 1.0
