"""The worker's Kafka producer: dead letters and derived records, acknowledged before commit."""

from __future__ import annotations

from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, MessageSizeTooLargeError

from service.contracts.settings import CommonSettings

# What one record may weigh (key, value, headers): Kafka's default `max.message.bytes`/`message.max.bytes`
# (1 MiB). A broker configured lower refuses the record itself; either way it is RecordTooLarge.
MAX_RECORD_BYTES = 1024 * 1024


class EmitFailed(Exception):
    """The broker did not acknowledge a derived record: an outage, retried."""


class RecordTooLarge(Exception):
    """A record over the broker's per-record size: retrying it can never succeed (a poison, not an outage)."""

    def __init__(self, topic: str, size: int, limit: int) -> None:
        super().__init__(f"a record for {topic} of {size} bytes is over the broker's limit of {limit} bytes")
        self.topic, self.size, self.limit = topic, size, limit


def record_size(key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None) -> int:
    return len(key or b"") + len(value) + sum(len(k) + len(v) for k, v in headers or [])


class KafkaEmitter:
    def __init__(
        self,
        settings: CommonSettings,
        client_id: str,
        linger_ms: int = 5,
        batch_size: int = 16384,
        max_record_bytes: int = MAX_RECORD_BYTES,
    ) -> None:
        # A worker that emits many records and then waits for all of them (wait() flushes at once)
        # passes a longer linger and bigger batches: fewer wake-ups of the sender thread.
        self._producer = KafkaProducer(
            bootstrap_servers=settings.bootstrap_list,
            client_id=client_id,
            acks="all",
            enable_idempotence=False,
            compression_type="lz4",
            linger_ms=linger_ms,
            batch_size=batch_size,
            max_block_ms=5000,
            request_timeout_ms=5000,
            delivery_timeout_ms=10_000,
            max_request_size=max_record_bytes,
        )
        self.max_record_bytes = max_record_bytes
        self._pending: list[Any] = []

    def emit(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None:
        """Send one record; RecordTooLarge (before anything is sent) for one over the per-record size."""
        size = record_size(key, value, headers)
        if size > self.max_record_bytes:
            raise RecordTooLarge(topic, size, self.max_record_bytes)
        try:
            self._pending.append(self._producer.send(topic, key=key, value=value, headers=headers or []))
        except MessageSizeTooLargeError as exc:  # the client's own estimate, framing included
            raise RecordTooLarge(topic, size, self.max_record_bytes) from exc
        except KafkaError as exc:
            raise EmitFailed(f"send to {topic} failed: {exc}") from exc

    def wait(self, timeout_s: float = 15.0) -> None:
        """Block until every emitted record is acknowledged; raise EmitFailed otherwise."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        try:
            self._producer.flush(timeout=timeout_s)
            for fut in pending:
                fut.get(timeout=0)
        except MessageSizeTooLargeError as exc:  # a broker whose limit is below ours refused one record
            raise RecordTooLarge("the broker", 0, self.max_record_bytes) from exc
        except KafkaError as exc:
            raise EmitFailed(f"derived records not acknowledged: {exc}") from exc

    def close(self) -> None:
        try:
            self._producer.flush(timeout=5)
        finally:
            self._producer.close(timeout=5)
