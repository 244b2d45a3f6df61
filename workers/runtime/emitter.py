"""The worker's Kafka producer: dead letters and derived records, acknowledged before commit."""

from __future__ import annotations

from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError

from service.contracts.settings import CommonSettings


class EmitFailed(Exception):
    """The broker did not acknowledge a derived record: an outage, retried."""


class KafkaEmitter:
    def __init__(self, settings: CommonSettings, client_id: str, linger_ms: int = 5, batch_size: int = 16384) -> None:
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
        )
        self._pending: list[Any] = []

    def emit(self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> None:
        try:
            self._pending.append(self._producer.send(topic, key=key, value=value, headers=headers or []))
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
        except KafkaError as exc:
            raise EmitFailed(f"derived records not acknowledged: {exc}") from exc

    def close(self) -> None:
        try:
            self._producer.flush(timeout=5)
        finally:
            self._producer.close(timeout=5)
