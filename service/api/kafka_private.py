"""The only place the API touches kafka-python's private attributes.

kafka-python (3.0.x here) has no public way to ask, without blocking, whether
the producer already has a topic's partitions, nor to stop a producer while
dropping the records it still holds, nor to hand it a list of records without
paying `send`'s per-record checks and wake-ups (a third of the API's producer
time). These are needed (see producer.py), so they are reached through
`KafkaProducer._metadata`, `_accumulator` and `_sender` (and a future's `_add_cb_eb`) in this
one module. tests/bench/bench_private.py measures the gain over `send()` + `add_callback`
(docs/throughput.md, "Private internals"); tests/service/api/test_private_internals.py (the
attributes and signatures) and test_kafka_private.py (behaviour) break on an upgrade that moves
them: then re-check these functions against the new release (and a public replacement, if there
is one).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

from kafka import KafkaProducer
from kafka import errors as KafkaErrors
from kafka.partitioner.default import DefaultPartitioner
from kafka.producer.future import FutureRecordMetadata
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

TESTED_MAJOR = 3  # the kafka-python major version these attributes were checked against


def partitions_known(producer: KafkaProducer, topics: Iterable[str]) -> bool:
    """True when `send` to every topic cannot block on a metadata fetch.

    The public `partitions_for` waits up to max_block_ms for metadata; this reads
    the cluster metadata the producer already holds and never waits.
    """
    metadata = producer._metadata  # ClusterMetadata
    return all(metadata.partitions_for_topic(topic) is not None for topic in topics)


def drop_pending(producer: KafkaProducer) -> None:
    """Stop the producer's sender thread now, without sending the records it holds.

    The public close() flushes first (and with timeout=0 raises while records
    are pending, leaving the sender running).
    """
    producer._sender.force_close()


def on_completion(
    futures: Iterable[FutureRecordMetadata],
    ack: Callable[[object], None],
    fail: Callable[[BaseException], None],
) -> None:
    """`ack` or `fail` called once per record future when it resolves (at once if it already has).

    What add_callback + add_errback do, with one lock round trip per future instead of two
    (kafka-python's own pairing, Future._add_cb_eb, which its record futures use).
    """
    for future in futures:
        future._add_cb_eb(ack, fail)


_HEADROOM = 64 * 1024  # more than a record's batch and record overhead plus the API's few small headers
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """kafka-python's (and the Java client's) murmur2 of a record key, computed word by word.

    The same hash as kafka.partitioner.default.murmur2 (tests compare them), with the
    little-endian words unpacked in one call instead of assembled byte by byte.
    """
    length = len(data)
    h = 0x9747B28C ^ length
    words = length // 4
    for k in struct.unpack_from(f"<{words}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail >= 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def append_records(
    producer: KafkaProducer,
    records: Iterable[tuple[str, bytes, bytes, list[tuple[str, bytes]]]],
) -> list[FutureRecordMetadata]:
    """What `send` does for keyed records whose topics' partitions the producer knows, with less per record.

    `send` re-checks its arguments, serialises, looks up metadata, estimates the size and
    may wake the sender thread for every record. Here each record goes straight to the
    producer's accumulator (the same call `send` makes, so batching, compression,
    idempotent sequence numbers, retries and delivery timeouts are the producer's own), on
    the partition `send` would pick (the default partitioner's murmur2 of the key), and the
    sender is woken once for the whole list. Call only after partitions_known(): a topic
    without metadata raises ValueError rather than wait.
    """
    if producer._closed:
        raise KafkaErrors.IllegalStateError("KafkaProducer already closed!")
    if not isinstance(producer.config["partitioner"], DefaultPartitioner):
        raise TypeError("append_records computes the default partitioner's choice only")
    if producer._transaction_manager is not None and producer._transaction_manager.is_transactional():
        raise TypeError("append_records does not add partitions to a transaction")
    metadata = producer._metadata  # ClusterMetadata
    accumulator = producer._accumulator  # RecordAccumulator
    limit = producer.config["max_request_size"]
    partitions: dict[str, list[int]] = {}
    futures: list[FutureRecordMetadata] = []
    wake = False
    for topic, key, value, headers in records:
        known = partitions.get(topic)
        if known is None:
            found = metadata.partitions_for_topic(topic)
            if found is None:
                raise ValueError(f"no metadata for topic {topic}: call partitions_known() first")
            known = partitions[topic] = sorted(found)
        if len(value) + len(key) + _HEADROOM > limit:  # rare: only then the exact estimate send() makes
            size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
            if size > limit:
                raise KafkaErrors.MessageSizeTooLargeError(
                    f"The message is {size} bytes when serialized which is larger than max_request_size {limit}"
                )
        tp = TopicPartition(topic, known[(murmur2(key) & 0x7FFFFFFF) % len(known)])
        future, batch_is_full, new_batch, _ = accumulator.append(tp, None, key, value, headers)
        futures.append(future)
        wake = wake or batch_is_full or new_batch
    if wake:
        producer._sender.wakeup()
    return futures
