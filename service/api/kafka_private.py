"""The only place the API touches kafka-python's private attributes.

kafka-python (3.0.x here) has no public way to ask, without blocking, whether
the producer already has a topic's partitions, nor to stop a producer while
dropping the records it still holds. Both are needed (see producer.py), so
they are reached through `KafkaProducer._metadata` and `KafkaProducer._sender`
in this one module, and tests/service/api/test_kafka_private.py breaks on an
upgrade that moves them: then re-check these two functions against the new
release (and a public replacement, if there is one).
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka import KafkaProducer

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
