"""The stored-record layout: the value and headers of an event record as it lies on Kafka.

Every writer of an event record (the API's two ingestion paths, the review UI's label events, the
assembler's events from spans, the tests' records) and every reader that rebuilds one takes it from
here. The value is StoredEvent as JSON, its fields in this order:

    {"schema_version":1,"id":...,"type":...,"tenant":...,"timestamp":...,"received_at":...,"body":...}

and the headers are the event id, type, tenant and schema version (then the W3C traceparent of
the request that carried it, when there is one).
"""

from __future__ import annotations

from typing import Any

import orjson

from service.contracts import topics as T
from service.contracts.vocabulary import EVENT_TYPES, SCHEMA_VERSION

Headers = list[tuple[str, bytes]]

SCHEMA_HEADER: tuple[str, bytes] = (T.H_SCHEMA, str(SCHEMA_VERSION).encode())
# Header tuples are shared between records: kafka-python only reads them.
_TYPE_HEADER = {etype: (T.H_EVENT_TYPE, etype.encode()) for etype in EVENT_TYPES}


def stored_document(
    event_id: str, event_type: str, tenant: str, timestamp: str, received_at: str, body: Any
) -> dict[str, Any]:
    """The record value as a document (timestamps as RFC 3339 text); orjson.dumps writes the value."""
    return {
        "schema_version": SCHEMA_VERSION,
        "id": event_id,
        "type": event_type,
        "tenant": tenant,
        "timestamp": timestamp,
        "received_at": received_at,
        "body": body,
    }


def stored_from_envelope(envelope: dict[str, Any], tenant: str, received_at: str) -> dict[str, Any]:
    """The record value as a document, for an event as a client sends it (type, id, timestamp, body)."""
    return stored_document(
        envelope["id"], envelope["type"], tenant, envelope["timestamp"], received_at, envelope["body"]
    )


def stored_value(
    event_id: str, event_type: str, tenant: str, timestamp: str, received_at: str, body: Any
) -> bytes:
    """The record value's bytes."""
    return orjson.dumps(stored_document(event_id, event_type, tenant, timestamp, received_at, body))


def record_headers(event_id: str, event_type: str, tenant: str, traceparent: bytes | None = None) -> Headers:
    """The record's headers."""
    headers = [
        (T.H_EVENT_ID, event_id.encode()),
        _TYPE_HEADER.get(event_type) or (T.H_EVENT_TYPE, event_type.encode()),
        (T.H_TENANT, tenant.encode()),
        SCHEMA_HEADER,
    ]
    if traceparent:
        headers.append(("traceparent", traceparent))
    return headers


class StoredBatch:
    """The same layout for records sharing a tenant, a received_at and a traceparent (one request),
    joined from bytes: the body as the client's bytes, no document built and encoded per record.

    `value` gives exactly stored_value's bytes for a body that is those bytes as orjson writes
    them, and a timestamp in datetime.isoformat's form (tests/service/contracts/test_stored.py)."""

    def __init__(self, tenant: str, received_at: str, traceparent: bytes | None) -> None:
        self._tenant_part = b'","tenant":' + orjson.dumps(tenant) + b',"timestamp":"'
        self._received_part = b'","received_at":"' + received_at.encode() + b'","body":'
        shared = [(T.H_TENANT, tenant.encode()), SCHEMA_HEADER]
        if traceparent:
            shared.append(("traceparent", traceparent))
        self._shared_headers = shared

    def value(self, id_bytes: bytes, event_type: str, timestamp: str, body: bytes | Any) -> bytes:
        return b"".join(
            (
                _VALUE_HEAD,
                id_bytes,
                _TYPE_PART[event_type],
                self._tenant_part,
                timestamp.encode(),
                self._received_part,
                body,
                b"}",
            )
        )

    def headers(self, id_bytes: bytes, event_type: str) -> Headers:
        return [(T.H_EVENT_ID, id_bytes), _TYPE_HEADER[event_type], *self._shared_headers]


_VALUE_HEAD = b'{"schema_version":' + str(SCHEMA_VERSION).encode() + b',"id":"'
_TYPE_PART = {etype: b'","type":"' + etype.encode() for etype in EVENT_TYPES}
