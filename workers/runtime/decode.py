"""Record -> Event, or the reason it cannot be one (a dead letter, never an outage)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

import orjson
from pydantic import Field, TypeAdapter, ValidationError

from service.contracts import BODY_MODELS, FeedbackBody, LabelBody, ReleaseBody, StoredEvent, TraceBody
from service.contracts.errors import describe_errors
from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import Event, SourceRecord


@dataclass(frozen=True)
class Undecodable:
    source: SourceRecord
    value: bytes | None
    headers: list[tuple[str, bytes]]
    reason: DeadLetterReason
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


def _explain(value: bytes) -> tuple[DeadLetterReason, str]:
    """Why a record failed, step by step (the slow path runs only for bad records)."""
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return DeadLetterReason.UNDECODABLE, f"value is not JSON: {exc}"
    if not isinstance(doc, dict):
        return DeadLetterReason.UNDECODABLE, "value is not a JSON object"
    try:
        stored = StoredEvent.model_validate(doc)
    except ValidationError as exc:
        return DeadLetterReason.INVALID_ENVELOPE, describe_errors("record", exc, limit=3)
    try:
        BODY_MODELS[stored.type].model_validate(stored.body)
    except ValidationError as exc:
        return DeadLetterReason.INVALID_BODY, describe_errors("record.body", exc, limit=3)
    return DeadLetterReason.INVALID_ENVELOPE, "record: rejected by the typed decoder but not by the step-by-step one"


_SCORE = TypeAdapter(Annotated[Union[FaithfulnessScoreEvent, ExclusionResultEvent],  # noqa: UP007
                               Field(discriminator="type")])


def _decode_score(source: SourceRecord, value: bytes, headers: list[tuple[str, bytes]]) -> Event | Undecodable:
    """A score event: its body is the score event; the envelope is built from its own fields
    (event_id is deterministic, so dedupe by id works as for ingested events)."""
    try:
        score = _SCORE.validate_json(value)
    except ValidationError as exc:
        return Undecodable(source, value, headers, DeadLetterReason.INVALID_SCORE, describe_errors("score", exc, limit=3))
    envelope: dict[str, Any] = {"id": score.event_id, "type": "score", "tenant": score.tenant,
                                "timestamp": score.trace_timestamp, "received_at": score.scored_at, "body": {}}
    stored = StoredEvent.model_construct(**envelope)
    return Event(source=source, stored=stored, body=score, raw=value, headers=headers)


def decode_record(record: Any, expected_type: str | None) -> Event | Undecodable:
    """Decode one kafka-python ConsumerRecord."""
    source = SourceRecord(record.topic, record.partition, record.offset, record.key, record.timestamp)
    headers = list(record.headers or [])
    value = record.value
    if value is None:
        return Undecodable(source, value, headers, DeadLetterReason.UNDECODABLE, "record has no value (a tombstone)")
    if expected_type == "score":
        return _decode_score(source, value, headers)
    try:
        stored = _RECORD.validate_json(value)
    except ValidationError:
        reason, detail = _explain(value)
        return Undecodable(source, value, headers, reason, detail)
    if expected_type is not None and stored.type != expected_type:
        return Undecodable(source, value, headers, DeadLetterReason.UNEXPECTED_TYPE,
                           f"record.type: '{stored.type}' on the topic of '{expected_type}' events")
    traceparent = next((v.decode("latin-1") for k, v in headers if k == "traceparent"), None)
    return Event(source=source, stored=stored, body=stored.body, traceparent=traceparent, raw=value,
                 headers=headers)
