"""A request body of POST /v1/events read as far as its events: decompressed (capped), its shape
checked from the bytes, parsed, its envelope list checked, and no event naming another tenant."""

from __future__ import annotations

import json
import zlib
from typing import Any

import orjson

from service.api import wire
from service.api.ingest_errors import IngestError
from service.contracts import vocabulary as L


def decompress(raw: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo Content-Encoding gzip, never inflating more than `limit` bytes (gzip bombs)."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("identity", ""):
        return raw
    if enc != "gzip":
        raise IngestError(
            415,
            f"Content-Encoding '{enc}' is not supported; send gzip or no encoding",
            field="Content-Encoding",
            rule="gzip_or_identity",
        )
    return inflate(raw, limit, 16 + zlib.MAX_WBITS, "gzip")


def inflate(raw: bytes, limit: int, wbits: int, rule: str, what: str = "") -> bytes:
    """Inflate `raw` (zlib's `wbits` framing) to at most `limit` bytes: a body that is not `what` (default:
    `rule`) data is a 400 naming `rule`, one that inflates past `limit` a 413 (compression bombs)."""
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise IngestError(400, f"body is not valid {what or rule}: {exc}", field="body", rule=rule) from exc
    if len(out) > limit or inflater.unconsumed_tail:
        raise IngestError(
            413, f"decompressed body exceeds {limit} bytes", field="body", rule="max_decompressed_bytes"
        )
    if not inflater.eof:
        raise IngestError(400, f"{rule} body is truncated", field="body", rule=rule)
    return out


def _nan_tolerant_loads(data: bytes) -> Any:
    # orjson rejects NaN/Infinity as invalid JSON; parse them here so the
    # error can name the field holding them instead of a byte offset.
    return json.loads(data, parse_constant=lambda c: float(c.replace("Infinity", "inf")))


def refuse_deep(depth: int) -> None:
    """A 400 naming max_json_depth for a body nested deeper than the contract allows (both endpoints)."""
    if depth > L.MAX_JSON_DEPTH:
        raise IngestError(
            400,
            f"body nests {depth} levels deep; at most {L.MAX_JSON_DEPTH}",
            field="body",
            rule="max_json_depth",
        )


def check_shape(data: bytes, max_events: int) -> None:
    """Depth and event count from the bytes, before the parser builds anything (a body of
    millions of `{}` or nested arrays is refused in milliseconds instead of built)."""
    shape = wire.json_shape(data, (2,))
    refuse_deep(shape.max_depth)
    if shape.items[2] > max_events:
        raise IngestError(
            413,
            f"{shape.items[2]} events in one batch; at most {max_events}",
            field="events",
            rule="max_length",
        )


def parse_envelope(data: bytes, max_events: int) -> list[Any]:
    check_shape(data, max_events)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            doc = _nan_tolerant_loads(data)
            # The fallback must not admit what orjson refused for another reason and cannot
            # write back to Kafka or into an error body: lone surrogates, integers over 64 bits.
            orjson.dumps(doc)
        except (ValueError, RecursionError, TypeError):
            raise IngestError(400, f"body is not valid JSON: {exc}", field="body", rule="json") from exc
    if not isinstance(doc, dict):
        raise IngestError(
            400, "body must be a JSON object with an 'events' list", field="body", rule="object"
        )
    extra = sorted(set(doc) - {"events"})
    if extra:
        raise IngestError(
            400,
            f"unknown top-level field '{extra[0]}'; only 'events' is allowed",
            field=extra[0],
            rule="extra_forbidden",
        )
    events = doc.get("events")
    if not isinstance(events, list):
        raise IngestError(400, "'events' must be a list of events", field="events", rule="list")
    if not events:
        raise IngestError(
            400, "'events' is empty; send at least one event", field="events", rule="min_length"
        )
    if len(events) > max_events:
        raise IngestError(
            413, f"{len(events)} events in one batch; at most {max_events}", field="events", rule="max_length"
        )
    return events


def check_tenant_fields(events: list[Any], tenant: str) -> None:
    """The tenant comes from the key: a body naming another tenant is refused outright."""
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            continue
        for where, holder in (("", ev), (".body", ev.get("body"))):
            if isinstance(holder, dict) and "tenant" in holder:
                named = holder["tenant"]
                if named != tenant:
                    raise IngestError(
                        403,
                        f"events[{i}]{where}.tenant names tenant {named!r} but the API key belongs to "
                        f"{tenant!r}; the tenant is taken from the key",
                        field=f"events[{i}]{where}.tenant",
                        rule="tenant_from_key",
                    )
                del holder["tenant"]
