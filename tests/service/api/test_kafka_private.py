"""kafka-python's private attributes the API relies on (service/api/kafka_private.py) still do what we need.

These tests run against the session's real broker. One of them failing after
an upgrade of kafka-python is the signal to re-check kafka_private.py.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError
from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_murmur2

from service.api.kafka_private import (
    TESTED_MAJOR,
    append_records,
    drop_pending,
    murmur2,
    on_completion,
    partitions_known,
)
from service.contracts.kafka import ensure_topics
from service.contracts.settings import CommonSettings


@pytest.fixture
def topic_and_producer(kafka_bootstrap: str, topic_prefix: str) -> Iterator[tuple[str, KafkaProducer]]:
    settings = CommonSettings(
        kafka_bootstrap_servers=kafka_bootstrap, kafka_topic_prefix=topic_prefix, kafka_partitions=2
    )
    ensure_topics(settings)
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_list, linger_ms=60_000, max_block_ms=5000)
    try:
        yield settings.topics.traces, producer
    finally:
        producer.close(timeout=1)


def test_the_installed_kafka_python_is_the_major_version_checked() -> None:
    major = int(kafka.__version__.split(".")[0])
    assert major == TESTED_MAJOR, (
        f"kafka-python {kafka.__version__} is installed; service/api/kafka_private.py was checked against "
        f"{TESTED_MAJOR}.x: re-check its private attributes, then update TESTED_MAJOR"
    )


def test_partitions_known_reads_metadata_without_waiting(
    topic_and_producer: tuple[str, KafkaProducer],
) -> None:
    topic, producer = topic_and_producer
    started = time.perf_counter()
    assert partitions_known(producer, [topic + ".absent"]) is False
    assert time.perf_counter() - started < 0.5  # max_block_ms is 5 s: it did not wait for metadata
    assert producer.partitions_for(topic) == {0, 1}  # the public call blocks until metadata arrives
    assert partitions_known(producer, [topic]) is True
    assert partitions_known(producer, [topic, topic + ".absent"]) is False


def test_drop_pending_stops_the_sender_with_records_still_held(
    topic_and_producer: tuple[str, KafkaProducer],
) -> None:
    topic, producer = topic_and_producer
    future = producer.send(topic, value=b"held back by linger_ms")
    drop_pending(producer)
    producer.close(timeout=1)  # would raise or wait out the timeout if the sender were still flushing
    assert not producer._sender.is_alive()
    assert not future.is_done or future.failed()


def test_murmur2_is_kafka_pythons_hash() -> None:
    rng = random.Random(7)
    for length in range(64):
        for _ in range(20):
            data = bytes(rng.randrange(256) for _ in range(length))
            assert murmur2(data) == kafka_murmur2(data), data


def test_append_records_lands_where_send_would_and_is_acknowledged(
    topic_and_producer: tuple[str, KafkaProducer], kafka_bootstrap: str
) -> None:
    topic, producer = topic_and_producer
    producer.partitions_for(topic)  # metadata first, as the API checks with partitions_known
    keys = [f"tenant/req-{i}".encode() for i in range(40)]
    headers = [("ragmon-event-id", b"x")]
    futures = append_records(producer, [(topic, k, b"v-" + k, headers) for k in keys])
    producer.flush(timeout=10)  # linger_ms is 60 s: only a flush sends them
    partitioner = DefaultPartitioner()
    placed = [f.get(timeout=10) for f in futures]
    expected = [partitioner.partition(topic, k, k, None, None, producer._metadata) for k in keys]
    assert [m.partition for m in placed] == expected
    assert len(set(expected)) == 2  # both partitions used: the hash really decides

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000
    )
    consumer.assign([TopicPartition(topic, p) for p in (0, 1)])
    got = {}
    for msg in consumer:
        got[msg.key] = (msg.partition, msg.value, msg.headers)
        if len(got) == len(keys):
            break
    consumer.close()
    assert got == {k: (p, b"v-" + k, headers) for k, p in zip(keys, expected, strict=True)}


def test_append_records_refuses_a_topic_without_metadata(
    topic_and_producer: tuple[str, KafkaProducer],
) -> None:
    topic, producer = topic_and_producer
    with pytest.raises(ValueError, match="no metadata"):
        append_records(producer, [(topic + ".absent", b"k", b"v", [])])


def test_on_completion_reports_each_record_once_acknowledged_or_failed(
    topic_and_producer: tuple[str, KafkaProducer],
) -> None:
    topic, producer = topic_and_producer
    producer.partitions_for(topic)
    futures = append_records(producer, [(topic, f"k{i}".encode(), b"v", []) for i in range(5)])
    acked: list[object] = []
    failed: list[BaseException] = []
    on_completion(futures[:3], acked.append, failed.append)  # registered while pending
    assert acked == [] and failed == []
    producer.flush(timeout=10)
    assert [m.offset for m in acked] == [f.get(0).offset for f in futures[:3]]  # type: ignore[attr-defined]
    on_completion(futures[3:], acked.append, failed.append)  # already resolved: called at once
    assert len(acked) == 5 and failed == []

    pending = append_records(producer, [(topic, b"k", b"v", [])])[0]
    on_completion([pending], acked.append, failed.append)
    error = KafkaTimeoutError("delivery timed out")
    pending.failure(error)  # what the sender does to a record it could not deliver
    assert failed == [error] and len(acked) == 5
