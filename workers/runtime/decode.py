"""Record -> Event, or the reason it cannot be one (a dead letter, never an outage)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Union
from uuid import UUID

import orjson
from pydantic import Field, TypeAdapter, ValidationError

from service.contracts import BODY_MODELS, FeedbackBody, LabelBody, ReleaseBody, StoredEvent, TraceBody
from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
from service.contracts.topics import H_EVENT_ID, H_EVENT_TYPE, H_TENANT
from workers.runtime.types import Event, SourceRecord


@dataclass(frozen=True)
class Undecodable:
    source: SourceRecord
    value: bytes | None
    headers: list[tuple[str, bytes]]
    reason: str
    detail: str


class _TraceRecord(StoredEvent):
    type: Literal["trace"]
    body: TraceBody  # type: ignore[assignment]


class _FeedbackRecord(StoredEvent):
    type: Literal["feedback"]
    body: FeedbackBody  # type: ignore[assignment]


class _ReleaseRecord(StoredEvent):
    type: Literal["release"]
    body: ReleaseBody  # type: ignore[assignment]


class _LabelRecord(StoredEvent):
    type: Literal["label"]
    body: LabelBody  # type: ignore[assignment]


# One pass over the bytes: parse and validate envelope and body together in
# pydantic-core, instead of orjson, then the envelope, then the body again.
_RECORD = TypeAdapter(Annotated[Union[_TraceRecord, _FeedbackRecord, _ReleaseRecord, _LabelRecord],  # noqa: UP007
                                Field(discriminator="type")])


def _explain(value: bytes) -> tuple[str, str]:
    """Why a record failed, step by step (the slow path runs only for bad records)."""
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return "undecodable", f"value is not JSON: {exc}"
    if not isinstance(doc, dict):
        return "undecodable", "value is not a JSON object"
    try:
        stored = StoredEvent.model_validate(doc)
    except ValidationError as exc:
        return "invalid_envelope", _format("record", exc)
    try:
        BODY_MODELS[stored.type].model_validate(stored.body)
    except ValidationError as exc:
        return "invalid_body", _format("record.body", exc)
    return "invalid_envelope", "record: rejected by the typed decoder but not by the step-by-step one"


def _format(prefix: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        loc = prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        parts.append(f"{loc}: {err['msg']} ({err['type']})")
    return "; ".join(parts)


_SCORE = TypeAdapter(Annotated[Union[FaithfulnessScoreEvent, ExclusionResultEvent],  # noqa: UP007
                               Field(discriminator="type")])
SCORE_TYPES = frozenset({"faithfulness_score", "exclusion_result"})


def _decode_score(source: SourceRecord, value: bytes, headers: list[tuple[str, bytes]]) -> Event | Undecodable:
    """A score event as an Event: its id dedupes it, its tenant routes it, `body` is the score event.

    A score kind this runtime does not know (a newer producer) is passed on
    with body None rather than dead-lettered: it is valid for someone else.
    """
    kind = next((v.decode("latin-1") for k, v in headers if k == H_EVENT_TYPE), None)
    if kind is not None and kind not in SCORE_TYPES:
        event_id = next((v.decode("latin-1") for k, v in headers if k == H_EVENT_ID), "")
        tenant = next((v.decode("latin-1") for k, v in headers if k == H_TENANT), "")
        try:
            now = datetime.now(UTC)
            stored = StoredEvent.model_construct(id=UUID(event_id), type="score",  # type: ignore[arg-type]
                                                 tenant=tenant, timestamp=now,
                                                 received_at=now, body={})
        except ValueError:
            return Undecodable(source, value, headers, "invalid_envelope", f"score header {H_EVENT_ID}: not a uuid")
        return Event(source=source, stored=stored, body=None, raw=value, headers=headers)
    try:
        score = _SCORE.validate_json(value)
    except ValidationError as exc:
        return Undecodable(source, value, headers, "invalid_body", _format("score", exc))
    stored = StoredEvent.model_construct(id=score.event_id, type="score",  # type: ignore[arg-type]
                                         tenant=score.tenant,
                                         timestamp=score.trace_timestamp, received_at=score.scored_at, body={})
    return Event(source=source, stored=stored, body=score, raw=value, headers=headers)


def decode_record(record: Any, expected_type: str | None) -> Event | Undecodable:
    """Decode one kafka-python ConsumerRecord."""
    source = SourceRecord(record.topic, record.partition, record.offset, record.key, record.timestamp)
    headers = list(record.headers or [])
    value = record.value
    if value is None:
        return Undecodable(source, value, headers, "undecodable", "record has no value (a tombstone)")
    if expected_type == "score":
        return _decode_score(source, value, headers)
    try:
        stored = _RECORD.validate_json(value)
    except ValidationError:
        reason, detail = _explain(value)
        return Undecodable(source, value, headers, reason, detail)
    if expected_type is not None and stored.type != expected_type:
        return Undecodable(source, value, headers, "wrong_topic",
                           f"record.type: '{stored.type}' on the topic of '{expected_type}' events")
    traceparent = next((v.decode("latin-1") for k, v in headers if k == "traceparent"), None)
    return Event(source=source, stored=stored, body=stored.body, traceparent=traceparent, raw=value,
                 headers=headers)
