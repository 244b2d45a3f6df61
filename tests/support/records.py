"""A consumed Kafka record as plain data: what the runtime's decoders read, not a mock."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FakeRecord:
    """The attributes of kafka-python's ConsumerRecord that the decoders read (workers/runtime/decode.py,
    workers/runtime/records.py)."""

    value: bytes | None
    headers: list[tuple[str, bytes]] | None = None
    topic: str = "p.traces"
    partition: int = 0
    offset: int = 0
    key: bytes | None = None
    timestamp: int = 0  # ms since the epoch, as kafka-python gives it
