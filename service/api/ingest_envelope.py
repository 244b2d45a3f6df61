"""An event's envelope in the plain form, read without pydantic: the canonical id and the RFC 3339
timestamp as nearly every client writes them (EventEnvelope judges every other form)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from service.contracts import BODY_MODELS
from service.contracts import vocabulary as L

# Such an envelope is read directly; pydantic's EventEnvelope, which would give the same values,
# still judges every other form (and names what is wrong).
_CANONICAL_UUID = re.compile(L.CANONICAL_UUID)
_RFC3339 = re.compile(L.RFC3339)


def plain_envelope(raw: dict[str, Any]) -> tuple[str, str, datetime, dict[str, Any]] | None:
    """(type, id, timestamp, body) of an envelope in the plain form, exactly as EventEnvelope would
    validate it; None for anything else, which then goes through EventEnvelope.

    tests/service/api/test_plain_envelope.py holds it to EventEnvelope's values on valid forms and
    checks it declines every form EventEnvelope refuses.
    """
    if len(raw) != 4:
        return None
    etype, event_id, ts, body = raw.get("type"), raw.get("id"), raw.get("timestamp"), raw.get("body")
    if (
        type(etype) is not str
        or etype not in BODY_MODELS
        or type(event_id) is not str
        or type(ts) is not str
        or type(body) is not dict
        or not _CANONICAL_UUID.match(event_id)
        or not _RFC3339.match(ts)
    ):
        return None
    try:
        when = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return etype, event_id, when, body


# CANONICAL_UUID for ids joined by line breaks; RFC3339 in parts (ASCII digits only: stricter).
_CANONICAL_UUIDS = re.compile(L.CANONICAL_UUIDS_BY_LINE)
_TIMESTAMP_PARTS = re.compile(L.RFC3339_PARTS)


def canonical_timestamp(text: str) -> str | None:
    """`datetime.fromisoformat(text).isoformat()` for an RFC 3339 timestamp, from its text (about a
    quarter of the time); None for any other form. A text fromisoformat refuses (month 13) gets a
    value here: the caller parses it too."""
    m = _TIMESTAMP_PARTS.match(text)
    if m is None:
        return None
    head, fraction, offset = m.groups()
    if fraction and fraction.strip("0"):
        head = f"{head}.{fraction.ljust(6, '0')}"
    return head + ("+00:00" if offset in ("Z", "-00:00") else offset)


def all_canonical(ids: list[str]) -> bool:
    """Every id of `ids` in the canonical form (CANONICAL_UUID), checked in one call: each has
    UUID_TEXT_LEN characters, so none holds a line break."""
    joined = "\n".join(ids)
    return (
        len(joined) == (L.UUID_TEXT_LEN + 1) * len(ids) - 1 and _CANONICAL_UUIDS.fullmatch(joined) is not None
    )
