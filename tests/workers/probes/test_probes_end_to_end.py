"""End to end: probe replays through the real API into a real probes worker process, beside a real metrics
worker that must not count them; a declared change gives no drop, an undeclared rebuild drops the overlap."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis

from service.contracts import reviewdb
from service.probes.store import Probe, add_probes
from tests.conftest import LOG_DIR
from tests.service.api.api_events import trace_event
from tests.service.api.api_harness import RunningApi, api_settings
from tests.support.kafka import wait_until
from tests.support.workers import WorkerProcess, wait_ready, worker_env
from tests.workers.probes.probe_events import probe_body

pytestmark = pytest.mark.slow
N = 10
SERIES = "ragmon_rag_probe_overlap_ratio"


@pytest.fixture
def stack(
    kafka_bootstrap: str, redis_url: str, redis_client: redis.Redis, topic_prefix: str, review_db_url: str
) -> Iterator[tuple[RunningApi, WorkerProcess, WorkerProcess]]:
    api = RunningApi(api_settings(kafka_bootstrap, redis_url, topic_prefix)).start()
    env = worker_env(kafka_bootstrap, redis_url, topic_prefix, RAGMON_DATABASE_URL=review_db_url)
    probes = WorkerProcess("workers.probes", env, LOG_DIR / f"probes-e2e-{topic_prefix}.log")
    metrics = WorkerProcess("workers.metrics", env, LOG_DIR / f"probes-e2e-metrics-{topic_prefix}.log")
    try:
        yield api, probes, metrics
    finally:
        probes.stop()
        metrics.stop()
        api.stop()


def _replay(api: RunningApi, answers: dict[str, list[str]], model: str, index: str) -> None:
    now = datetime.now(UTC).isoformat()
    events = [
        {"type": "trace", "id": str(uuid.uuid4()), "timestamp": now, "body": probe_body(q, ids, model, index)}
        for q, ids in answers.items()
    ]
    r = api.post(events)
    assert r.status_code == 202, r.text


def _overlap(worker: WorkerProcess, model: str, index: str) -> Any:
    labels = {"tenant": "acme", "probe_set": "billing", "embedding_model": model, "index_version": index}
    found = [v for (n, ls), v in worker.scrape().items() if n == SERIES and set(labels.items()) <= set(ls)]
    return found[0] if found else None


def test_probes_through_the_api_are_compared_and_never_counted_in_production(
    stack: tuple[RunningApi, WorkerProcess, WorkerProcess], review_db_url: str
) -> None:
    api, probes, metrics = stack
    with reviewdb.connect(review_db_url) as conn:
        reviewdb.migrate(conn)
        add_probes(conn, "acme", [Probe("billing", f"q{i}", f"question {i}", [f"g{i}"]) for i in range(N)])
    wait_ready(probes)
    wait_ready(metrics)
    v1 = {f"q{i}": [f"g{i}", f"a{i}", f"b{i}"] for i in range(N)}
    _replay(api, v1, "emb-v1", "idx-1")
    assert api.post([trace_event()]).status_code == 202  # one user request
    wait_until(lambda: _overlap(probes, "emb-v1", "idx-1") == 1.0, timeout_s=60, what="the baseline replay")
    wait_until(lambda: metrics.total("ragmon_rag_queries_total") >= 1, timeout_s=60, what="the user's trace")
    # declared: a release, then the new index's replay: its own baseline, no drop
    release = {"release": "2026.12.6", "variant": "production", "description": "emb-v2 index"}
    now = datetime.now(UTC).isoformat()
    assert (
        api.post(
            [{"type": "release", "id": str(uuid.uuid4()), "timestamp": now, "body": release}]
        ).status_code
        == 202
    )
    v2 = {f"q{i}": [f"g{i}", f"c{i}", f"d{i}"] for i in range(N)}
    wait_until(lambda: metrics.total("ragmon_release_info") >= 1, timeout_s=60, what="the release marker")
    _replay(api, v2, "emb-v2", "idx-2")
    wait_until(lambda: _overlap(probes, "emb-v2", "idx-2") == 1.0, timeout_s=60, what="the declared replay")
    # undeclared: same names, neighbours rebuilt worse
    worse = {f"q{i}": [f"x{i}", f"y{i}", f"g{i}"] for i in range(N)}
    _replay(api, worse, "emb-v2", "idx-2")
    wait_until(lambda: (_overlap(probes, "emb-v2", "idx-2") or 1.0) < 0.7, timeout_s=60, what="the drop")
    assert probes.total("ragmon_rag_probe_stored_traces_total", tenant="acme") == 3 * N
    # every production series of the metrics worker saw the one user trace only
    assert metrics.total("ragmon_rag_queries_total") == 1
    assert metrics.total("ragmon_worker_events_total", worker="metrics", type="trace") == 1
