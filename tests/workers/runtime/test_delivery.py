"""Delivery semantics of the consumer runtime, on a real broker and a real Redis.

Workers run as real processes (`python -m tests.workers.runtime.probe_worker`)
so that SIGTERM, kill -9 and restarts are the real thing; the runtime runs in this
process where a test must fail one given step of a batch.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.contracts import Topics
from service.contracts.kafka import ensure_topics
from service.local.embedded import ChildProcess, start_redis
from tests.conftest import LOG_DIR
from tests.support.kafka import RecordWriter, committed_total, read_all, stored, trace_body, wait_until
from tests.support.workers import WorkerProcess, wait_ready, worker_env
from workers.runtime.consumer import ConsumerRuntime
from workers.runtime.contract import Processor
from workers.runtime.dedupe import Dedupe
from workers.runtime.emitter import KafkaEmitter
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.settings import WorkerSettings
from workers.runtime.types import Event, Rejection

ROOT = Path(__file__).resolve().parents[3]
PROBE = [sys.executable, "-m", "tests.workers.runtime.probe_worker"]


def probe_env(bootstrap: str, redis_url: str, prefix: str, **extra: str) -> dict[str, str]:
    return worker_env(bootstrap, redis_url, prefix, **extra)


def start_probe(workers: list[WorkerProcess], env: dict[str, str], tag: str) -> WorkerProcess:
    w = WorkerProcess("probe", env, LOG_DIR / f"probe-{tag}-{len(workers)}.log", argv=PROBE)
    workers.append(w)
    wait_ready(w)
    return w


def send_traces(writer: RecordWriter, start: int, n: int) -> list[str]:
    events = [stored("trace", trace_body(i)) for i in range(start, start + n)]
    for e in events:
        writer.send_event(e)
    writer.flush()
    return [e["id"] for e in events]


class OwnRedis:
    """A Redis of the test's own, for an outage: killed, then restarted on its port (empty, no persistence)."""

    def __init__(self) -> None:
        self.child: ChildProcess = start_redis(log_dir=LOG_DIR)
        self.url = f"redis://127.0.0.1:{self.child.port}/0"

    def kill(self) -> None:
        self.child.kill()

    def restart(self) -> None:
        self.child = start_redis(port=self.child.port, log_dir=LOG_DIR)


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    own = OwnRedis()
    yield own
    own.child.stop()


def test_poison_records_go_to_the_dlq_and_the_rest_is_processed(
    kafka_bootstrap: str,
    redis_url: str,
    redis_client: redis.Redis,
    topic_prefix: str,
    workers: list[WorkerProcess],
) -> None:
    topics = Topics(topic_prefix)
    writer = RecordWriter(kafka_bootstrap, topics)
    before = send_traces(writer, 0, 20)
    writer.send_raw(topics.traces, b"\xff\xfe definitely not json", key=b"acme/poison")
    writer.send_raw(topics.traces, b'{"schema_version": 1, "id": "not-a-uuid"}', key=b"acme/poison")
    rejected = stored("trace", trace_body(999, query={"text": "reject me"}))
    writer.send_event(rejected)
    after = send_traces(writer, 100, 20)
    w = start_probe(workers, probe_env(kafka_bootstrap, redis_url, topic_prefix), "poison")

    wait_until(lambda: redis_client.hlen("ragmon:probe:effect") == 40, 30, what="40 effects")
    effects = {k.decode() for k in redis_client.hkeys("ragmon:probe:effect")}
    assert effects == set(before) | set(after)
    dead = wait_until(
        lambda: len(read_all(kafka_bootstrap, topics.dlq)) == 3 and read_all(kafka_bootstrap, topics.dlq),
        20,
        what="3 dead letters",
    )
    reasons = sorted(dict(r.headers)["ragmon-dlq-reason"].decode() for r in dead)
    assert reasons == ["invalid_body", "invalid_envelope", "undecodable"]
    for r in dead:
        h = dict(r.headers)
        assert h["ragmon-dlq-source-topic"] == topics.traces.encode()
        assert int(h["ragmon-dlq-source-offset"]) >= 0 and h["ragmon-dlq-worker"] == b"probe"
        assert h["ragmon-dlq-detail"]
    assert any(r.value == b"\xff\xfe definitely not json" for r in dead), (
        "the poison bytes are kept unchanged"
    )
    assert w.total("ragmon_worker_dead_letters_total") == 3
    assert w.total("ragmon_worker_events_total", outcome="processed") == 40
    wait_until(
        lambda: committed_total(kafka_bootstrap, f"{topic_prefix}-probe", topics.traces)[0] == 43,
        15,
        what="all committed",
    )
    writer.close()


def test_sigterm_commits_and_a_restart_resumes_from_committed_offsets(
    kafka_bootstrap: str,
    redis_url: str,
    redis_client: redis.Redis,
    topic_prefix: str,
    workers: list[WorkerProcess],
) -> None:
    topics = Topics(topic_prefix)
    writer = RecordWriter(kafka_bootstrap, topics)
    env = probe_env(kafka_bootstrap, redis_url, topic_prefix)
    first = send_traces(writer, 0, 50)
    w1 = start_probe(workers, env, "restart")
    wait_until(lambda: w1.total("ragmon_worker_events_total", outcome="processed") == 50, 30, what="first 50")
    assert w1.terminate() == 0, w1.log_text()[-2000:]
    assert committed_total(kafka_bootstrap, f"{topic_prefix}-probe", topics.traces) == (50, 50)

    second = send_traces(writer, 50, 30)
    w2 = start_probe(workers, env, "restart")
    wait_until(lambda: w2.total("ragmon_worker_events_total", outcome="processed") == 30, 30, what="next 30")
    # Resumed from the commit: nothing re-read, so no dedupe hits and no second attempt.
    assert w2.total("ragmon_worker_dedupe_hits_total") == 0
    attempts = {k.decode(): int(v) for k, v in redis_client.hgetall("ragmon:probe:attempts").items()}
    assert set(attempts) == set(first) | set(second)
    assert set(attempts.values()) == {1}
    writer.close()


def test_redis_outage_pauses_commits_without_dead_letters(
    kafka_bootstrap: str, topic_prefix: str, workers: list[WorkerProcess], own_redis: OwnRedis
) -> None:
    url = own_redis.url
    topics = Topics(topic_prefix)
    writer = RecordWriter(kafka_bootstrap, topics)
    try:
        w = start_probe(workers, probe_env(kafka_bootstrap, url, topic_prefix), "redis-down")
        first = send_traces(writer, 0, 20)
        client = redis.Redis.from_url(url)
        wait_until(lambda: client.hlen("ragmon:probe:effect") == 20, 30, what="first 20")
        wait_until(
            lambda: committed_total(kafka_bootstrap, f"{topic_prefix}-probe", topics.traces)[0] == 20,
            15,
            what="commit 20",
        )

        own_redis.kill()
        second = send_traces(writer, 20, 30)
        wait_until(lambda: w.total("ragmon_worker_retries_total") >= 2, 30, what="retries during the outage")
        assert committed_total(kafka_bootstrap, f"{topic_prefix}-probe", topics.traces)[0] == 20, (
            "nothing committed while Redis is down"
        )
        assert w.total("ragmon_worker_ready") == 0

        own_redis.restart()
        client = redis.Redis.from_url(url)
        # Redis came back empty (no persistence): the second batch's effects land once it is retried.
        wait_until(lambda: client.hlen("ragmon:probe:effect") == 30, 60, what="second batch after recovery")
        assert {k.decode() for k in client.hkeys("ragmon:probe:effect")} == set(second)
        wait_until(
            lambda: committed_total(kafka_bootstrap, f"{topic_prefix}-probe", topics.traces)[0] == 50,
            15,
            what="commit 50",
        )
        assert read_all(kafka_bootstrap, topics.dlq, timeout_s=1.5) == []
        assert w.total("ragmon_worker_dead_letters_total") == 0
        assert len(first) == 20
    finally:
        writer.close()


def test_redis_gone_while_idle_and_ticking_is_an_outage_not_a_crash(
    kafka_bootstrap: str, topic_prefix: str, workers: list[WorkerProcess], own_redis: OwnRedis
) -> None:
    """Periodic work that calls Redis gets the batch's outage handling: not ready, retried, never fatal."""
    url = own_redis.url
    topics = Topics(topic_prefix)
    writer = RecordWriter(kafka_bootstrap, topics)
    try:
        env = probe_env(
            kafka_bootstrap, url, topic_prefix, PROBE_TICK_REDIS="1", RAGMON_WORKER_RETRY_MAX_S="1"
        )
        w = start_probe(workers, env, "tick-redis-down")
        client = redis.Redis.from_url(url)
        wait_until(lambda: int(client.get("ragmon:probe:ticks") or 0) > 2, 30, what="ticks")
        own_redis.kill()  # idle: only tick meets the outage
        wait_until(lambda: not w.ready(), 15, what="not ready during the outage")
        sent = send_traces(writer, 0, 25)  # and batches arrive while it lasts
        wait_until(
            lambda: w.total("ragmon_worker_retries_total", error="ConnectionError") >= 3, 30, what="retries"
        )
        assert w.proc.poll() is None, w.log_text()[-3000:]
        assert committed_total(kafka_bootstrap, f"{topic_prefix}-probe", topics.traces)[0] == 0

        own_redis.restart()
        client = redis.Redis.from_url(url)
        wait_until(lambda: client.hlen("ragmon:probe:effect") == 25, 60, what="effects after recovery")
        assert {k.decode() for k in client.hkeys("ragmon:probe:effect")} == set(sent)
        wait_until(
            lambda: committed_total(kafka_bootstrap, f"{topic_prefix}-probe", topics.traces)[0] == 25,
            15,
            what="commit 25",
        )
        wait_until(w.ready, 15, what="ready again")
        assert w.total("ragmon_worker_dead_letters_total") == 0
        assert "periodic work failed (ConnectionError" in w.log_text()
    finally:
        writer.close()


def test_dead_letter_flood_halts_the_worker_without_committing(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, workers: list[WorkerProcess]
) -> None:
    topics = Topics(topic_prefix)
    writer = RecordWriter(kafka_bootstrap, topics)
    for i in range(60):
        writer.send_raw(topics.traces, b"garbage %d" % i, key=b"k%d" % (i % 4))
    writer.flush()
    env = probe_env(
        kafka_bootstrap,
        redis_url,
        topic_prefix,
        RAGMON_WORKER_DLQ_MIN_MESSAGES="20",
        RAGMON_WORKER_DLQ_MAX_RATIO="0.5",
    )
    w = WorkerProcess("probe", env, LOG_DIR / "probe-halt.log", argv=PROBE)
    workers.append(w)
    wait_until(lambda: w.total("ragmon_worker_halted", reason="dead_letter_ratio") == 1, 30, what="halt")
    assert not w.ready()
    assert "HALTED" in w.log_text() and "RAGMON_WORKER_DLQ_MAX_RATIO" in w.log_text()
    assert committed_total(kafka_bootstrap, f"{topic_prefix}-probe", topics.traces)[0] < 60, (
        "the flood was not drained"
    )
    assert len(read_all(kafka_bootstrap, topics.dlq, timeout_s=1.5)) < 60
    assert w.proc.poll() is None, "halted, not crashed: no restart loop"
    writer.close()


class SeenOnce(Processor):
    """Counts how often process() saw each event: an in-process count, as a real worker keeps."""

    name = "seen"
    event_types = ("trace",)

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def process(self, events: list[Event]) -> list[Rejection]:
        self.seen.update(e.id for e in events)
        return []


def test_redis_failing_after_processing_retries_the_rest_of_the_batch_not_the_processing(
    kafka_bootstrap: str,
    redis_client: redis.Redis,
    topic_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redis goes away between process() and marking the ids done: the retry marks them and commits; it
    does not hand the batch to the processor again, whose in-process counts would then count it twice."""
    settings = WorkerSettings(
        kafka_bootstrap_servers=kafka_bootstrap,
        kafka_topic_prefix=topic_prefix,
        kafka_partitions=1,
        worker_poll_timeout_ms=100,
        worker_retry_initial_s=0.05,
    )
    ensure_topics(settings)
    registry = CollectorRegistry()
    metrics = RuntimeMetrics(registry, "seen")
    emitter = KafkaEmitter(settings, client_id="test-seen")
    processor = SeenOnce()
    runtime = ConsumerRuntime(processor, settings, metrics, emitter, redis_client)
    real_mark_done = Dedupe.mark_done
    failures = [redis.ConnectionError("Connection closed by server (test)")]

    def mark_done(self: Dedupe, events: list[Event]) -> Any:
        if failures:
            raise failures.pop()
        return real_mark_done(self, events)

    monkeypatch.setattr(Dedupe, "mark_done", mark_done)
    writer = RecordWriter(kafka_bootstrap, Topics(topic_prefix))
    sent = send_traces(writer, 0, 10)
    processed = {"worker": "seen", "type": "trace", "outcome": "processed"}
    try:
        deadline = time.monotonic() + 30
        while registry.get_sample_value("ragmon_worker_events_total", processed) != 10:
            assert time.monotonic() < deadline, f"not accounted; seen {processor.seen}, failures {failures}"
            runtime._step()
        assert not failures, "the failure was met"
        retries = {"worker": "seen", "error": "ConnectionError"}
        assert registry.get_sample_value("ragmon_worker_retries_total", retries) == 1
        assert processor.seen == Counter(dict.fromkeys(sent, 1))
        assert committed_total(kafka_bootstrap, f"{topic_prefix}-seen", settings.topics.traces)[0] == 10
        assert all(redis_client.exists(f"ragmon:done:seen:acme:{i}") for i in sent), (
            "marked done by the retry"
        )
    finally:
        writer.close()
        runtime.consumer.close()
        emitter.close()
