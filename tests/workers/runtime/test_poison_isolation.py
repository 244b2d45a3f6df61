"""A record whose processing raises, or whose derived record can never fit the broker, is dead-lettered alone.

The probe worker (probe_worker.py) raises RecursionError on a trace whose query is "raise me" and emits a
2 MiB derived record for "too large"; before the runtime isolated them, either one failed its batch on
every retry and the partition stalled for every tenant behind it.
"""

from __future__ import annotations

import orjson
import redis

from service.contracts import Topics
from tests.support.kafka import RecordWriter, read_all, stored, trace_body, wait_until
from tests.support.workers import WorkerProcess
from tests.workers.runtime.test_delivery import probe_env, send_traces, start_probe
from workers.runtime.reasons import DeadLetterReason


def test_a_poison_record_is_dead_lettered_alone_and_its_batch_is_processed(
    kafka_bootstrap: str,
    redis_url: str,
    redis_client: redis.Redis,
    topic_prefix: str,
    workers: list[WorkerProcess],
) -> None:
    topics = Topics(topic_prefix)
    writer = RecordWriter(kafka_bootstrap, topics)
    before = send_traces(writer, 0, 20)
    poison = [
        stored("trace", trace_body(900 + i, query={"text": text}))
        for i, text in enumerate(("raise me", "too large"))
    ]
    for e in poison:
        writer.send_event(e)
    writer.flush()
    after = send_traces(writer, 100, 20)
    w = start_probe(workers, probe_env(kafka_bootstrap, redis_url, topic_prefix), "isolation")

    wait_until(lambda: redis_client.hlen("ragmon:probe:effect") >= 40, 30, what="40 effects")
    effects = {k.decode() for k in redis_client.hkeys("ragmon:probe:effect")}
    assert effects == set(before) | set(after), (
        "the poison records' neighbours were all processed, the poison not"
    )
    dead = wait_until(
        lambda: len(read_all(kafka_bootstrap, topics.dlq)) >= 2 and read_all(kafka_bootstrap, topics.dlq),
        20,
        what="2 dead letters",
    )
    by_reason = {dict(r.headers)["ragmon-dlq-reason"].decode(): r for r in dead}
    assert sorted(by_reason) == ["derived_record_too_large", "processing_failed"]
    assert b"RecursionError" in dict(by_reason["processing_failed"].headers)["ragmon-dlq-detail"]
    assert (
        b"over the broker's limit" in dict(by_reason["derived_record_too_large"].headers)["ragmon-dlq-detail"]
    )
    assert {r.value for r in dead} == {orjson.dumps(e) for e in poison}, "dead-lettered unchanged"
    wait_until(
        lambda: w.total("ragmon_worker_dead_letters_total", reason="processing_failed") == 1,
        10,
        what="the dead letter counted",
    )
    assert w.total("ragmon_worker_dead_letters_total", reason="derived_record_too_large") == 1
    assert w.total("ragmon_worker_events_total", outcome="processed") == 40
    assert w.total("ragmon_worker_retries_total") == 0, "a poison record is not an outage"
    assert not read_all(kafka_bootstrap, topics.scores), "the oversized derived record was never produced"
    # Every reason is exported from 0 before its first dead letter, so that first one is an increase
    # (Prometheus' increase() does not count a series that first appears at 1: RagmonDeadLetters)
    exported = {
        dict(labels)["reason"]: value
        for (name, labels), value in w.scrape().items()
        if name == "ragmon_worker_dead_letters_total"
    }
    assert exported == {r.value: float(r.value in by_reason) for r in DeadLetterReason}
