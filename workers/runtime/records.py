"""Topics whose records are neither native events nor score events: raw OTLP spans and log records.

(Score events have their own event type, `score`, decoded by
workers/runtime/decode.py.) A processor reads such a topic by listing
`subscriptions` (topic, event type, decoder) beside or instead of
`event_types`; the runtime then decodes those topics' records with the given
decoder and everything else (dedupe by event id, dead-lettering, retries,
commit after processing, lag) works as for native events.

Such a record has no StoredEvent of its own. The decoder below wraps it in
one built without validation, holding exactly the envelope fields the runtime
reads: `id` (the record's event id, for dedupe), `type` (a metric label),
`tenant` and `received_at` (for the delay metric); `Event.body` carries the
decoded record itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from service.contracts import StoredEvent
from service.contracts.spans import SPANS_EVENT_TYPE, OtlpRecord, SpanRecordError, decode_span_record
from workers.runtime.decode import RecordDecoder, Undecodable
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import Event, SourceRecord

SubscriptionDecoder = Callable[[Any], "Event | Undecodable"]


@dataclass(frozen=True)
class Subscription:
    topic: str
    event_type: str  # the `type` label of the runtime's metrics for this topic's records
    decode: SubscriptionDecoder


def envelope(event_id: str, event_type: str, tenant: str, at: datetime) -> StoredEvent:
    """The envelope fields the runtime reads, for a record that is not a native event."""
    fields: dict[str, Any] = {
        "id": event_id,
        "type": event_type,
        "tenant": tenant,
        "timestamp": at,
        "received_at": at,
        "body": {},
    }
    return StoredEvent.model_construct(**fields)  # unvalidated on purpose: `type` is not a native event type


def _source(record: Any) -> tuple[SourceRecord, list[tuple[str, bytes]]]:
    return (
        SourceRecord(record.topic, record.partition, record.offset, record.key, record.timestamp),
        list(record.headers or []),
    )


def decode_otlp_record(
    record: Any, parse: Callable[[bytes, list[tuple[str, bytes]]], OtlpRecord[Any]], event_type: str
) -> Event | Undecodable:
    """A record of raw OTLP telemetry, parsed by `parse` (which raises SpanRecordError) into Event.body;
    a tombstone or a record `parse` refuses is Undecodable (dead-lettered by the runtime)."""
    source, headers = _source(record)
    if record.value is None:
        return Undecodable(
            source, None, headers, DeadLetterReason.UNDECODABLE, "record has no value (a tombstone)"
        )
    try:
        parsed = parse(record.value, headers)
    except SpanRecordError as exc:
        return Undecodable(source, record.value, headers, DeadLetterReason.INVALID_SPANS, str(exc))
    received = datetime.fromtimestamp(record.timestamp / 1000, UTC) if record.timestamp else datetime.now(UTC)
    stored = envelope(parsed.event_id, event_type, parsed.tenant, received)
    return Event(source=source, stored=stored, body=parsed, raw=record.value, headers=headers)


def decode_spans_record(record: Any) -> Event | Undecodable:
    """A spans-topic record (service/contracts/spans.py): body is the decoded SpanRecord."""
    return decode_otlp_record(record, decode_span_record, SPANS_EVENT_TYPE)


def native_subscription(topic: str, event_type: str, view: type[Any] | None = None) -> Subscription:
    """Native events of `event_type` on a topic other than their type's own (the probes topic holds trace
    events, docs/probes.md), decoded exactly as on their own topic (decode.py), into `view` when given."""
    decoder = RecordDecoder({event_type: view} if view is not None else None)
    return Subscription(topic, event_type, lambda record: decoder.decode(record, event_type))
