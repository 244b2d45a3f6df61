"""Topics whose records are not native events: score events and raw OTLP spans.

A processor reads them by listing `subscriptions` (topic, event type, decoder)
beside or instead of `event_types`; the runtime then decodes those topics'
records with the given decoder and everything else (dedupe by event id,
dead-lettering, retries, commit after processing, lag) works as for native
events.

Such a record has no StoredEvent of its own. The decoders below wrap it in
one built without validation, holding exactly the envelope fields the runtime
reads: `id` (the record's event id, for dedupe), `type` (a metric label),
`tenant` and `received_at` (for the delay metric); `Event.body` carries the
decoded record itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from service.contracts import StoredEvent
from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
from service.contracts.spans import SPANS_EVENT_TYPE, SpanRecordError, decode_span_record
from workers.runtime.decode import Undecodable
from workers.runtime.types import Event, SourceRecord

RecordDecoder = Callable[[Any], "Event | Undecodable"]
ScoreEvent = FaithfulnessScoreEvent | ExclusionResultEvent

# Discriminated by `type`, so an error names the field of the right kind of score.
SCORE_EVENT: TypeAdapter[ScoreEvent] = TypeAdapter(
    Annotated[FaithfulnessScoreEvent | ExclusionResultEvent, Field(discriminator="type")])


@dataclass(frozen=True)
class Subscription:
    topic: str
    event_type: str  # the `type` label of the runtime's metrics for this topic's records
    decode: RecordDecoder


def envelope(event_id: str, event_type: str, tenant: str, at: datetime) -> StoredEvent:
    """The envelope fields the runtime reads, for a record that is not a native event."""
    fields: dict[str, Any] = {"id": event_id, "type": event_type, "tenant": tenant, "timestamp": at,
                              "received_at": at, "body": {}}
    return StoredEvent.model_construct(**fields)  # unvalidated on purpose: `type` is not a native event type


def _source(record: Any) -> tuple[SourceRecord, list[tuple[str, bytes]]]:
    return (SourceRecord(record.topic, record.partition, record.offset, record.key, record.timestamp),
            list(record.headers or []))


def decode_score_record(record: Any) -> Event | Undecodable:
    """A scores-topic record: FaithfulnessScoreEvent or ExclusionResultEvent, told apart by `type`."""
    source, headers = _source(record)
    if record.value is None:
        return Undecodable(source, None, headers, "undecodable", "record has no value (a tombstone)")
    try:
        score = SCORE_EVENT.validate_json(record.value)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = "".join(f".{p}" for p in err["loc"][1:])  # loc[0] is the score kind (the union's tag)
        return Undecodable(source, record.value, headers, "invalid_score", f"score{where}: {err['msg']}")
    stored = envelope(str(score.event_id), score.type, score.tenant, score.scored_at)
    return Event(source=source, stored=stored, body=score, raw=record.value, headers=headers)


def decode_spans_record(record: Any) -> Event | Undecodable:
    """A spans-topic record (service/contracts/spans.py): body is the decoded SpanRecord."""
    source, headers = _source(record)
    if record.value is None:
        return Undecodable(source, None, headers, "undecodable", "record has no value (a tombstone)")
    try:
        spans = decode_span_record(record.value, headers)
    except SpanRecordError as exc:
        return Undecodable(source, record.value, headers, "invalid_spans", str(exc))
    received = datetime.fromtimestamp(record.timestamp / 1000, UTC) if record.timestamp else datetime.now(UTC)
    stored = envelope(spans.event_id, SPANS_EVENT_TYPE, spans.tenant, received)
    return Event(source=source, stored=stored, body=spans, raw=record.value, headers=headers)
