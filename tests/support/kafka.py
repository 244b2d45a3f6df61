"""Producing contract records straight to Kafka, and reading topics back, for worker tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import orjson
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from service.contracts import Topics, record_key
from service.contracts import topics as T
from service.contracts.stored import stored_document


def stored(
    event_type: str,
    body: dict[str, Any],
    tenant: str = "acme",
    event_id: str | None = None,
    when: datetime | None = None,
) -> dict[str, Any]:
    when = when or datetime.now(UTC)
    return stored_document(
        event_id or str(uuid.uuid4()),
        event_type,
        tenant,
        when.isoformat(),
        datetime.now(UTC).isoformat(),
        body,
    )


def trace_body(i: int, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "trace_id": f"trace-{i}",
        "request_id": f"req-{i}",
        "intent": "billing",
        "release": "v1",
        "query": {"text": f"question {i}"},
        "retrieval": {"documents": [{"id": f"d{i}", "text": "context"}]},
        "answer": {"text": "answer", "citations": [f"d{i}"]},
        "timings": {"retrieval": 20.0, "generation": 400.0, "total": 450.0, "ttft": 150.0},
        "usage": {"model": "gpt-x", "tokens": {"prompt": 100, "completion": 20}, "cost_usd": 0.001},
    }
    body.update(overrides)
    return body


class RecordWriter:
    def __init__(self, bootstrap: str, topics: Topics) -> None:
        self.topics = topics
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", linger_ms=5, compression_type="lz4"
        )

    def send_event(self, event: dict[str, Any]) -> None:
        self.producer.send(
            self.topics.for_event(event["type"]),
            key=record_key(event["type"], event["tenant"], event["body"]),
            value=orjson.dumps(event),
            headers=[(T.H_EVENT_ID, event["id"].encode()), (T.H_EVENT_TYPE, event["type"].encode())],
        )

    def send_raw(self, topic: str, value: bytes, key: bytes | None = None) -> None:
        self.producer.send(topic, key=key, value=value)

    def flush(self) -> None:
        self.producer.flush(timeout=30)

    def close(self) -> None:
        self.producer.close(timeout=5)


def read_all(bootstrap: str, topic: str, timeout_s: float = 3.0) -> list[Any]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=int(timeout_s * 1000)
    )
    parts = consumer.partitions_for_topic(topic) or set()
    tps = [TopicPartition(topic, p) for p in parts]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    records = list(consumer)
    consumer.close()
    return records


def committed_total(bootstrap: str, group: str, topic: str) -> tuple[int, int]:
    """(sum of the group's committed offsets, sum of end offsets) over the topic's partitions.

    End offsets are read from the records themselves: Tansu's ListOffsets
    answers the last batch's base offset + 1, not the log end.
    """
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    parts = consumer.partitions_for_topic(topic) or set()
    tps = [TopicPartition(topic, p) for p in parts]
    consumer.close()
    ends = {tp: 0 for tp in tps}
    for rec in read_all(bootstrap, topic, timeout_s=1.0):
        tp = TopicPartition(rec.topic, rec.partition)
        ends[tp] = max(ends[tp], rec.offset + 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: tps}).get(group, {})
    finally:
        admin.close()
    committed = sum(offsets[tp].offset for tp in tps if tp in offsets and offsets[tp].offset >= 0)
    return committed, sum(ends.values())


def wait_until(predicate: Any, timeout_s: float, interval_s: float = 0.2, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last value: {last!r})")


def ids(events: Iterable[dict[str, Any]]) -> list[str]:
    return [e["id"] for e in events]
