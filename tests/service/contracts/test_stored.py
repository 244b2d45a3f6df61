"""The stored-record layout (service/contracts/stored.py): the batch form joined from bytes gives
the same value and headers as the document form, and the value is a valid StoredEvent."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from service.contracts import StoredEvent
from service.contracts import topics as T
from service.contracts.stored import (
    StoredBatch,
    record_headers,
    stored_document,
    stored_from_envelope,
    stored_value,
)
from service.contracts.vocabulary import EVENT_TYPES

BODIES = {
    "trace": {"trace_id": "t", "request_id": "r", "query": {"text": 'caf\u00e9 "q"\n'}},
    "feedback": {"trace_id": "t", "kind": "thumbs", "value": True},
    "release": {"release": "v1"},
    "label": {"trace_id": "t", "faithful": False, "note": "\u2603"},
}


@pytest.mark.parametrize("etype", EVENT_TYPES)
@pytest.mark.parametrize("traceparent", [None, b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"])
@pytest.mark.parametrize("tenant", ["acme", 'we"ird\\tenant'])
def test_the_batch_form_writes_the_document_form_s_bytes(
    etype: str, traceparent: bytes | None, tenant: str
) -> None:
    event_id = str(uuid.uuid4())
    now = datetime(2026, 1, 2, 3, 4, 5, 600_000, tzinfo=UTC)
    ts = (now - timedelta(seconds=3)).isoformat()
    body = BODIES[etype]
    layout = StoredBatch(tenant, now.isoformat(), traceparent)
    value = layout.value(event_id.encode(), etype, ts, orjson.dumps(body))
    assert value == stored_value(event_id, etype, tenant, ts, now.isoformat(), body)
    assert layout.headers(event_id.encode(), etype) == record_headers(event_id, etype, tenant, traceparent)
    assert orjson.loads(value) == stored_document(event_id, etype, tenant, ts, now.isoformat(), body)
    if tenant != "acme":
        return  # the bytes agree for any tenant text; a tenant is a name (NAME_PATTERN) to be valid
    parsed = StoredEvent.model_validate_json(value)
    assert (str(parsed.id), parsed.type, parsed.tenant, parsed.body) == (event_id, etype, tenant, body)


def test_the_headers_name_the_event_and_the_schema() -> None:
    headers = dict(record_headers("e-1", "label", "acme"))
    assert headers == {
        T.H_EVENT_ID: b"e-1",
        T.H_EVENT_TYPE: b"label",
        T.H_TENANT: b"acme",
        T.H_SCHEMA: b"1",
    }


def test_an_envelope_becomes_the_document_of_its_record() -> None:
    envelope = {
        "type": "release",
        "id": "e-1",
        "timestamp": "2026-01-01T00:00:00+00:00",
        "body": BODIES["release"],
    }
    assert stored_from_envelope(envelope, "acme", "2026-01-01T00:00:01+00:00") == stored_document(
        "e-1", "release", "acme", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:01+00:00", BODIES["release"]
    )
