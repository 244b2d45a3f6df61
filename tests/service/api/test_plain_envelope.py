"""The plain-envelope shortcut of the ingest pipeline gives exactly what EventEnvelope gives, or declines.

service/api/ingest_envelope.py reads an envelope in the plain form (canonical UUID, RFC 3339 timestamp,
the four fields) without pydantic; every other form goes through EventEnvelope. Here the
shortcut is held to the model: on the forms it takes it must produce the model's values, and
it must decline every envelope the model refuses (so refusals keep the model's messages).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic import ValidationError

from service.api.ingest_envelope import plain_envelope
from service.contracts import EventEnvelope

BODY: dict[str, Any] = {"trace_id": "t-1"}
ID = "0b7f9a52-6c0e-4c8e-9a51-2f1f7f0f3e11"

TIMESTAMPS = [
    "2026-12-03T12:12:36Z",
    "2026-12-03T12:12:36.089+00:00",
    "2026-12-03T12:12:36.123456-05:30",
    "2026-12-03T12:12:36.1+14:00",
    "2026-12-03T23:59:59.999999-00:00",
    "2024-02-29T00:00:00Z",
    # forms the shortcut leaves to the model (accepted or refused there)
    "2026-12-03 12:12:36Z",
    "2026-12-03T12:12:36",
    "2026-12-03T12:12:36.1234567Z",
    "2026-12-03t12:12:36z",
    "2026-02-30T00:00:00Z",
    "2026-12-03T24:00:00Z",
    "2026-12-03T12:60:00Z",
    "2026-12-03T12:12:60Z",
    "2026-12-03T12:12:36+24:00",
    "2026-12-03T12:12:36+99:99",
    "2025-02-29T00:00:00Z",
    "0000-01-01T00:00:00Z",
    "2026-12-03",
    "1733227956",
    "",
    " 2026-12-03T12:12:36Z",
    "2026-12-03T12:12:36Z\n",
    "２０２６-12-03T12:12:36Z",
]
IDS = [
    ID,
    "3c9d2f4e-8a1b-4c7d-9e2f-5a6b7c8d9e0f",
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    ID.upper(),
    ID.replace("-", ""),
    "{" + ID + "}",
    "urn:uuid:" + ID,
    ID + "\n",
    ID[:-1],
    ID[:-1] + "g",
    "",
    "０b7f9a52-6c0e-4c8e-9a51-2f1f7f0f3e11",
]


def envelopes() -> list[Any]:
    base = {"type": "trace", "id": ID, "timestamp": "2026-12-03T12:12:36Z", "body": BODY}
    out: list[Any] = [{**base, "timestamp": ts} for ts in TIMESTAMPS]
    out += [{**base, "id": i} for i in IDS]
    out += [{**base, "type": t} for t in ("feedback", "release", "label", "Trace", "span", "", 1, None)]
    out += [{**base, "body": b} for b in ({}, [], None, "x", 1)]
    out += [
        {**base, "extra": 1},
        {k: v for k, v in base.items() if k != "body"},
        {k: v for k, v in base.items() if k != "timestamp"},
        {**base, "id": None},
        {**base, "id": uuid.UUID(ID)},
        {**base, "timestamp": 1733227956},
    ]
    return out


@pytest.mark.parametrize("raw", envelopes(), ids=lambda r: repr(r)[:80])
def test_plain_envelope_agrees_with_the_model(raw: dict[str, Any]) -> None:
    plain = plain_envelope(raw)
    try:
        env = EventEnvelope.model_validate(raw)
    except ValidationError:
        assert plain is None, "the shortcut took an envelope the model refuses"
        return
    if plain is None:
        return  # a form left to the model: fine, the model reads it
    etype, event_id, ts, body = plain
    assert (etype, event_id, body) == (env.type, str(env.id), env.body)
    assert ts == env.timestamp and ts.utcoffset() == env.timestamp.utcoffset()
    assert ts.isoformat() == env.timestamp.isoformat()  # what the stored record says


@pytest.mark.parametrize("ts", TIMESTAMPS[:6])
def test_the_common_forms_take_the_shortcut(ts: str) -> None:
    raw = {"type": "trace", "id": ID, "timestamp": ts, "body": BODY}
    assert plain_envelope(raw) is not None
