"""kill -9 of one worker in a group of two, mid-stream."""

from __future__ import annotations

import threading
import time

import redis

from service.contracts import Topics
from tests.conftest import LOG_DIR
from tests.support.kafka import RecordWriter, committed_total, stored, trace_body, wait_until
from tests.support.workers import WorkerProcess, wait_ready
from tests.workers.runtime.test_delivery import PROBE, probe_env

N = 3000
MAX_BATCH = 100


def test_kill_minus_nine_loses_nothing_and_redelivers_at_most_one_batch(
    kafka_bootstrap: str,
    redis_url: str,
    redis_client: redis.Redis,
    topic_prefix: str,
    workers: list[WorkerProcess],
) -> None:
    topics = Topics(topic_prefix)
    env = probe_env(
        kafka_bootstrap, redis_url, topic_prefix, PROBE_DELAY_S="0.05", RAGMON_WORKER_MAX_BATCH=str(MAX_BATCH)
    )
    workers.append(a := WorkerProcess("probe", env, LOG_DIR / "probe-crash-a.log", argv=PROBE))
    workers.append(b := WorkerProcess("probe", env, LOG_DIR / "probe-crash-b.log", argv=PROBE))
    wait_ready(a)
    wait_ready(b)
    wait_until(
        lambda: (
            a.total("ragmon_worker_assigned_partitions") > 0
            and b.total("ragmon_worker_assigned_partitions") > 0
        ),
        30,
        what="both workers own partitions",
    )

    sent: list[str] = []
    writer = RecordWriter(kafka_bootstrap, topics)

    def stream() -> None:
        for chunk in range(30):  # 3,000 traces over about three seconds
            for i in range(chunk * 100, chunk * 100 + 100):
                e = stored("trace", trace_body(i))
                writer.send_event(e)
                sent.append(e["id"])
            writer.flush()
            time.sleep(0.1)

    producer = threading.Thread(target=stream)
    producer.start()
    wait_until(lambda: a.total("ragmon_worker_events_total", outcome="processed") >= 300, 30, what="A busy")
    a.kill9()
    producer.join()
    writer.close()

    # Nothing lost: B took over A's partitions and every event's effect is in Redis.
    wait_until(lambda: redis_client.hlen("ragmon:probe:effect") == N, 90, what="every effect")
    assert {k.decode() for k in redis_client.hkeys("ragmon:probe:effect")} == set(sent)
    wait_until(
        lambda: committed_total(kafka_bootstrap, f"{topic_prefix}-probe", topics.traces)[0] == N,
        30,
        what="all committed",
    )

    # Redelivery is bounded by what A had in flight when it died: records it
    # processed but whose offsets it had not committed. Its effects are
    # idempotent (one effect per id above); the attempts show the redelivery.
    attempts = [int(v) for v in redis_client.hvals("ragmon:probe:attempts")]
    redelivered = sum(1 for n in attempts if n > 1)
    assert max(attempts) <= 2
    assert redelivered <= MAX_BATCH, f"{redelivered} events seen twice; more than one in-flight batch"
    # Those A had already marked done were skipped by B's dedupe, not reprocessed.
    assert b.total("ragmon_worker_dedupe_hits_total") + redelivered <= MAX_BATCH
