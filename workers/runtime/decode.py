"""Record -> Event, or the reason it cannot be one (a dead letter, never an outage).

A processor may name a view per event type (`views`, see contract.Processor):
the record is then decoded once, by msgspec, into that view, which holds only
the fields the worker reads, with the contract's rules on them
(service/contracts/views.py). Without a view a record is validated against
the full contract models. Either way a record that fails goes to the
dead-letter topic with the reason found by the step-by-step explanation below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

import msgspec
import orjson
from pydantic import Field, TypeAdapter, ValidationError, create_model

from service.contracts import BODY_MODELS, StoredEvent
from service.contracts.errors import describe_errors
from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent, ImplicitSignalEvent
from service.contracts.views import record_decoder
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import Event, SourceRecord


@dataclass(frozen=True)
class Undecodable:
    source: SourceRecord
    value: bytes | None
    headers: list[tuple[str, bytes]]
    reason: DeadLetterReason
    detail: str


# One record model per event type: the envelope with its type fixed and its body typed by BODY_MODELS.
_RECORD_MODELS = tuple(
    create_model(
        f"_{event_type.title()}Record",
        __base__=StoredEvent,
        type=(Literal[event_type], ...),  # type: ignore[arg-type]
        body=(body, ...),
    )
    for event_type, body in BODY_MODELS.items()
)
# One pass over the bytes: parse and validate envelope and body together in
# pydantic-core, instead of orjson, then the envelope, then the body again.
_RECORD: TypeAdapter[Any] = TypeAdapter(
    Annotated[Union[_RECORD_MODELS], Field(discriminator="type")]  # type: ignore[arg-type]  # noqa: UP007
)


def _explain(value: bytes, expected_type: str | None, view_error: str = "") -> tuple[DeadLetterReason, str]:
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
    if expected_type is not None and stored.type != expected_type:
        return DeadLetterReason.UNEXPECTED_TYPE, _wrong_type(stored.type, expected_type)
    try:
        BODY_MODELS[stored.type].model_validate(stored.body)
    except ValidationError as exc:
        return DeadLetterReason.INVALID_BODY, describe_errors("record.body", exc, limit=3)
    if view_error:  # a rule only the view applies (stricter: a timezone on the envelope's times)
        in_body = view_error.startswith(("record.body.", "record.body:"))
        return (DeadLetterReason.INVALID_BODY if in_body else DeadLetterReason.INVALID_ENVELOPE), view_error
    return (
        DeadLetterReason.INVALID_ENVELOPE,
        "record: rejected by the typed decoder but not by the step-by-step one",
    )


_SCORE = TypeAdapter(
    Annotated[
        Union[FaithfulnessScoreEvent, ExclusionResultEvent, ImplicitSignalEvent],  # noqa: UP007
        Field(discriminator="type"),
    ]
)


def _decode_score(
    source: SourceRecord, value: bytes, headers: list[tuple[str, bytes]]
) -> Event | Undecodable:
    """A score event: its body is the score event; the envelope is built from its own fields
    (event_id is deterministic, so dedupe by id works as for ingested events)."""
    try:
        score = _SCORE.validate_json(value)
    except ValidationError as exc:
        return Undecodable(
            source, value, headers, DeadLetterReason.INVALID_SCORE, describe_errors("score", exc, limit=3)
        )
    envelope: dict[str, Any] = {
        "id": score.event_id,
        "type": "score",
        "tenant": score.tenant,
        "timestamp": score.trace_timestamp,
        "received_at": score.scored_at,
        "body": {},
    }
    stored = StoredEvent.model_construct(**envelope)
    return Event(source=source, stored=stored, body=score, raw=value, headers=headers)


def _canonical(value: bytes, view: msgspec.json.Decoder[Any]) -> Any:
    """The record read through the contract models, when the view's strict decode refused it.

    The API validates with pydantic, which coerces some spellings ("0.5" for a number, "yes" for
    true) and stores the body as the client sent it; a view decodes strictly. Such a record is
    the contract's: its body is written back in the models' canonical JSON and decoded again.
    None when the contract models refuse it too (then it is a dead letter, _explain says why).
    """
    try:
        stored = StoredEvent.model_validate_json(value)
        body = BODY_MODELS[stored.type].model_validate(stored.body)
        canonical = stored.model_copy(update={"body": body.model_dump(mode="json", exclude_unset=True)})
        return view.decode(canonical.model_dump_json())
    except (ValidationError, msgspec.ValidationError, msgspec.DecodeError):
        return None


def _wrong_type(got: str, expected: str) -> str:
    return f"record.type: '{got}' on the topic of '{expected}' events"


def _view_error(exc: msgspec.ValidationError) -> str:
    """msgspec's "Expected `int` >= 0 - at `$.body.usage`" as "record.body.usage: Expected `int` >= 0"."""
    message, _, where = str(exc).rpartition(" - at `")
    if not message:
        return f"record: {exc}"
    return f"record{where.rstrip('`').removeprefix('$')}: {message}"


def decode_record(record: Any, expected_type: str | None) -> Event | Undecodable:
    """Decode one kafka-python ConsumerRecord against the full contract models."""
    return RecordDecoder().decode(record, expected_type)


class RecordDecoder:
    """Decodes a worker's records, each once: into its view where the processor names one."""

    def __init__(self, views: Mapping[str, type[Any]] | None = None) -> None:
        self._views = {event_type: record_decoder(view) for event_type, view in (views or {}).items()}

    def decode(self, record: Any, expected_type: str | None) -> Event | Undecodable:
        source = SourceRecord(record.topic, record.partition, record.offset, record.key, record.timestamp)
        headers = list(record.headers or [])
        value = record.value
        if value is None:
            return Undecodable(
                source, value, headers, DeadLetterReason.UNDECODABLE, "record has no value (a tombstone)"
            )
        if expected_type == "score":
            return _decode_score(source, value, headers)
        view = self._views.get(expected_type) if expected_type is not None else None
        stored: Any
        try:
            stored = _RECORD.validate_json(value) if view is None else view.decode(value)
        except ValidationError:
            return Undecodable(source, value, headers, *_explain(value, expected_type))
        except RecursionError:  # msgspec recurses once per level: a deep value must not escape as an outage
            return Undecodable(
                source,
                value,
                headers,
                DeadLetterReason.UNDECODABLE,
                "record: JSON nested deeper than the decoder's recursion limit",
            )
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            assert view is not None
            stored = _canonical(value, view)
            if stored is None:
                detail = _view_error(exc) if isinstance(exc, msgspec.ValidationError) else ""
                return Undecodable(source, value, headers, *_explain(value, expected_type, detail))
        if expected_type is not None and stored.type != expected_type:
            return Undecodable(
                source,
                value,
                headers,
                DeadLetterReason.UNEXPECTED_TYPE,
                _wrong_type(stored.type, expected_type),
            )
        traceparent = next((v.decode("latin-1") for k, v in headers if k == "traceparent"), None)
        return Event(
            source=source,
            stored=stored,
            body=stored.body,
            traceparent=traceparent,
            raw=value,
            headers=headers,
        )
