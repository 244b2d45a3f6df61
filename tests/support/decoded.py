"""Events as the runtime hands them to a processor: a stored record decoded by RecordDecoder."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from service.contracts import StoredEvent
from tests.support.records import FakeRecord
from workers.runtime.decode import RecordDecoder
from workers.runtime.types import Event


def decoded_event(
    stored: StoredEvent | Mapping[str, Any],
    views: Mapping[str, type[Any]] | None,
    *,
    topic: str = "test.events",
    offset: int = 0,
    key: bytes | None = None,
    timestamp_ms: int = 0,
) -> Event:
    """The record the API would store for `stored`, decoded into the worker's `views` (the real decode)."""
    value = stored.model_dump_json().encode() if isinstance(stored, StoredEvent) else orjson.dumps(stored)
    event_type = stored.type if isinstance(stored, StoredEvent) else stored["type"]
    out = RecordDecoder(views).decode(FakeRecord(value, [], topic, 0, offset, key, timestamp_ms), event_type)
    assert isinstance(out, Event), f"the test built a record the decoder rejects: {out}"
    return out
