"""What the consumer runtime hands a worker's processor, and what it expects back.

The processor contract itself (what a processor implements, what the runtime
guarantees around it) is workers/runtime/contract.py; this module holds the
values that cross it: an `Event` in, a `Rejection` or an `InvalidEvent` back,
a `Readiness` for the health endpoint, the `Emitter` for derived records.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Protocol, TypeVar
from uuid import UUID

from workers.runtime.reasons import DeadLetterReason

B = TypeVar("B")


@dataclass(frozen=True)
class SourceRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    timestamp_ms: int


class Envelope(Protocol):
    """What the API added around a body: the contract's StoredEvent, or the envelope of a view."""

    @property
    def id(self) -> UUID: ...
    @property
    def type(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def timestamp(self) -> datetime: ...
    @property
    def received_at(self) -> datetime: ...


@dataclass
class Event:
    """One decoded record: the stored envelope, its parsed body and where it came from."""

    source: SourceRecord
    stored: Envelope
    body: Any  # the processor's view of this type (Processor.views), else the contract's body model
    traceparent: str | None = None
    raw: bytes | None = None  # the record value as consumed, for dead-lettering it unchanged
    headers: list[tuple[str, bytes]] = field(default_factory=list)

    @cached_property
    def id(self) -> str:
        """The event id as text (formatting a UUID costs microseconds; workers ask several times)."""
        return str(self.stored.id)

    @property
    def type(self) -> str:
        return self.stored.type

    @property
    def tenant(self) -> str:
        return self.stored.tenant

    def body_as(self, model: builtins.type[B]) -> B:
        """The body, already validated by the runtime's decode, as `model`; another type is rejected."""
        if isinstance(self.body, model):
            return self.body
        raise InvalidEvent(
            DeadLetterReason.UNEXPECTED_TYPE,
            f"type: {self.type!r}; this worker expects a {model.__name__} here",
        )


@dataclass(frozen=True)
class Rejection:
    """An event the processor refuses as invalid: it goes to the dead-letter topic."""

    event: Event
    reason: DeadLetterReason  # the closed set, used as a metric label
    detail: str = ""  # human-readable, names the field and rule


def split_by_body(
    events: list[Event], model: builtins.type[B]
) -> tuple[list[tuple[Event, B]], list[Rejection]]:
    """(events with their `model` body, rejections of the rest) for a processor that reads one type."""
    typed: list[tuple[Event, B]] = []
    rejections: list[Rejection] = []
    for event in events:
        try:
            typed.append((event, event.body_as(model)))
        except InvalidEvent as exc:
            rejections.append(Rejection(event, exc.reason, exc.detail))
    return typed, rejections


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str = ""


READY = Readiness(True)


class InvalidEvent(Exception):
    """Raised by pure domain code for input it cannot interpret (never for outages)."""

    def __init__(self, reason: DeadLetterReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Emitter(Protocol):
    """Produces derived records (e.g. score events). The runtime flushes it and
    waits for every acknowledgement before it commits the batch's offsets."""

    def emit(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None: ...

    def wait(self, timeout_s: float = 15.0) -> None:
        """Block until every record emitted so far is acknowledged; raise if one failed."""
        ...
