"""Record -> Event, or the reason it cannot be one (a dead letter, never an outage)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from service.contracts import BODY_MODELS, StoredEvent
from workers.runtime.types import Event, SourceRecord


@dataclass(frozen=True)
class Undecodable:
    source: SourceRecord
    value: bytes | None
    headers: list[tuple[str, bytes]]
    reason: str
    detail: str


def _errors(prefix: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        loc = prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        parts.append(f"{loc}: {err['msg']} ({err['type']})")
    return "; ".join(parts)


def decode_record(record: Any, expected_type: str | None) -> Event | Undecodable:
    """Decode one kafka-python ConsumerRecord."""
    source = SourceRecord(record.topic, record.partition, record.offset, record.key, record.timestamp)
    headers = list(record.headers or [])
    value = record.value
    try:
        doc = orjson.loads(value) if value is not None else None
    except orjson.JSONDecodeError as exc:
        return Undecodable(source, value, headers, "undecodable", f"value is not JSON: {exc}")
    if not isinstance(doc, dict):
        return Undecodable(source, value, headers, "undecodable", "value is not a JSON object")
    try:
        stored = StoredEvent.model_validate(doc)
    except ValidationError as exc:
        return Undecodable(source, value, headers, "invalid_envelope", _errors("record", exc))
    if expected_type is not None and stored.type != expected_type:
        return Undecodable(source, value, headers, "wrong_topic",
                           f"record.type: '{stored.type}' on the topic of '{expected_type}' events")
    try:
        body = BODY_MODELS[stored.type].model_validate(stored.body)
    except ValidationError as exc:
        return Undecodable(source, value, headers, "invalid_body", _errors("record.body", exc))
    traceparent = next((v.decode("latin-1") for k, v in headers if k == "traceparent"), None)
    return Event(source=source, stored=stored, body=body, traceparent=traceparent, raw=value, headers=headers)
