"""The metrics worker across a Redis outage while it both processes batches and ticks.

Its tick (the unjoined-feedback sweep, the release refresh) calls Redis every
second; before the runtime gave tick the outage handling a batch gets, the
first tick after Redis went away raised ConnectionError and the worker died.
Redis here is stopped with SHUTDOWN SAVE and restarted from its snapshot, so
the parked feedback survives: every event must be counted exactly once.

The processor-level tests below fail one Redis call of a batch the way a slow or
vanishing Redis does (redis-py raises; the runtime retries the same events): before
the batch's counts were deferred to its last Redis call, a retried trace was counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry
from redis.client import Pipeline

from service.contracts import Topics
from service.local.embedded import ChildProcess, start_redis
from tests.conftest import LOG_DIR
from tests.support.kafka import RecordWriter, committed_total, read_all, stored, trace_body, wait_until
from tests.support.workers import WorkerProcess, wait_ready, worker_env
from tests.workers.metrics.test_processor import as_event, val
from workers.metrics.config import MetricsConfig
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor

PARK_S = 2  # feedback without its trace is swept as unjoined after this long: the tick has real work


def feedback(trace: str) -> dict[str, object]:
    return stored("feedback", {"trace_id": trace, "kind": "regenerate"})


def send(writer: RecordWriter, start: int, n: int) -> None:
    """n traces, a regenerate feedback for each, and n feedback for traces that never come."""
    for i in range(start, start + n):
        writer.send_event(stored("trace", trace_body(i)))
        writer.send_event(feedback(f"trace-{i}"))
        writer.send_event(feedback(f"missing-{i}"))
    writer.flush()


def test_a_redis_outage_while_processing_and_ticking_loses_and_doubles_nothing(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    data = tmp_path / "redis-data"
    server: ChildProcess = start_redis(log_dir=LOG_DIR, data_dir=data)
    url = f"redis://127.0.0.1:{server.port}/0"
    config = tmp_path / "ragmon.yaml"
    config.write_text(f"metrics:\n  park_s: {PARK_S}\n  release_refresh_s: 0.5\n")
    env = worker_env(
        kafka_bootstrap,
        url,
        topic_prefix,
        config,
        RAGMON_WORKER_RETRY_MAX_S="1",
        RAGMON_WORKER_MAX_BATCH="20",
    )
    topics = Topics(topic_prefix)
    writer = RecordWriter(kafka_bootstrap, topics)
    worker = WorkerProcess("workers.metrics", env, LOG_DIR / f"metrics-redis-outage-{topic_prefix}.log")
    try:
        wait_ready(worker)
        send(writer, 0, 30)
        wait_until(lambda: worker.total("ragmon_feedback_unjoined_total") == 30, 30, what="first sweep")

        # Feedback parked now is swept by a tick that runs into the outage.
        send(writer, 30, 30)
        wait_until(lambda: worker.total("ragmon_rag_queries_total") == 60, 30, what="second batch processed")
        # ...and its feedback (another topic, consumed on its own schedule): no batch may be in flight
        # when Redis goes, so that the outage meets the ticks first.
        wait_until(
            lambda: worker.total("ragmon_worker_events_total", outcome="processed") == 180,
            30,
            what="second batch's feedback processed",
        )
        redis.Redis.from_url(url).shutdown(save=True)
        time.sleep(PARK_S + 1)  # idle: only the ticks meet the outage
        assert worker.proc.poll() is None, f"the worker exited:\n{worker.log_text()[-3000:]}"
        send(writer, 60, 30)  # batches arrive during the outage too
        time.sleep(2)
        assert worker.proc.poll() is None, f"the worker exited:\n{worker.log_text()[-3000:]}"
        assert not worker.ready()
        assert worker.total("ragmon_worker_ready") == 0
        assert worker.total("ragmon_worker_retries_total") >= 2
        assert worker.total("ragmon_feedback_unjoined_total") < 90

        server = start_redis(port=server.port, log_dir=LOG_DIR, data_dir=data)
        wait_until(
            lambda: worker.total("ragmon_feedback_unjoined_total") == 90, 60, what="every orphan swept"
        )
        wait_until(worker.ready, 30, what="ready again")
        assert worker.total("ragmon_rag_queries_total") == 90
        assert worker.total("ragmon_feedback_total", kind="regenerate") == 90
        # Every orphan was parked; feedback read before its own trace (another topic) waited too.
        assert 90 <= worker.total("ragmon_feedback_parked_total") <= 180
        assert worker.total("ragmon_worker_events_total", outcome="processed") == 270
        assert worker.total("ragmon_worker_dead_letters_total") == 0
        for topic, n in ((topics.traces, 90), (topics.feedback, 180)):
            wait_until(
                lambda t=topic, n=n: committed_total(kafka_bootstrap, f"{topic_prefix}-metrics", t)[0] == n,
                15,
                what=f"{topic} committed",
            )
        assert read_all(kafka_bootstrap, topics.dlq, timeout_s=1.5) == []
        assert worker.proc.poll() is None
        assert "periodic work failed (ConnectionError" in worker.log_text()
    finally:
        writer.close()
        worker.stop()
        server.stop()


def fail_next_pipeline(monkeypatch: pytest.MonkeyPatch, executed: bool) -> None:
    """The next pipeline of the process raises ConnectionError, after Redis ran it (`executed`: the reply
    was lost) or before (Redis went away first)."""
    real: Callable[..., Any] = Pipeline.execute
    armed = [True]

    def execute(self: Pipeline, *args: Any, **kwargs: Any) -> Any:
        if armed[0]:
            armed[0] = False
            if executed:
                real(self, *args, **kwargs)
            raise redis.ConnectionError("Connection closed by server (test)")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "execute", execute)


def test_a_batch_retried_after_redis_failed_counts_its_traces_once(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = CollectorRegistry()
    proc = MetricsProcessor(MetricsConfig(park_s=60), MetricsWorkerMetrics(registry), redis_client)
    proc.process([as_event(feedback("trace-1"))])  # parked: its trace comes in the failing batch
    batch = [as_event(stored("trace", trace_body(i))) for i in range(1, 4)]
    fail_next_pipeline(monkeypatch, executed=False)
    with pytest.raises(redis.ConnectionError):
        proc.process(batch)
    labels = {"tenant": "acme", "variant": "production", "intent": "billing"}
    assert val(registry, "ragmon_rag_queries_total", **labels) == 0, "nothing counted by the failed try"
    proc.process(batch)  # the runtime's retry: the same events
    assert val(registry, "ragmon_rag_queries_total", **labels) == 3
    assert (
        val(registry, "ragmon_feedback_total", **labels, release="v1", kind="regenerate", reason="none") == 1
    )


def test_a_trace_whose_join_reply_was_lost_still_counts_its_parked_feedback(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis ran the batch's join scripts (the park emptied) but the reply never came: the retry of the same
    events takes the same feedback again. Before, it found the park empty and the feedback was never counted."""
    registry = CollectorRegistry()
    proc = MetricsProcessor(MetricsConfig(park_s=60), MetricsWorkerMetrics(registry), redis_client)
    proc.process([as_event(feedback("trace-1"))])
    batch = [as_event(stored("trace", trace_body(1)))]
    fail_next_pipeline(monkeypatch, executed=True)
    with pytest.raises(redis.ConnectionError):
        proc.process(batch)
    proc.process(batch)
    labels = {"tenant": "acme", "variant": "production", "intent": "billing"}
    assert val(registry, "ragmon_rag_queries_total", **labels) == 1
    assert (
        val(registry, "ragmon_feedback_total", **labels, release="v1", kind="regenerate", reason="none") == 1
    )
    assert val(registry, "ragmon_feedback_traces_total", **labels, release="v1", kind="any") == 1
