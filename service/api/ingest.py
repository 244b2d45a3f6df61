"""The ingestion pipeline of POST /v1/events, free of HTTP and Kafka.

Body bytes -> decompress (capped) -> JSON -> envelope checks -> per-event
validation, time window, duplicate ids -> PII redaction -> Kafka records.
Every refusal names the field and the rule. A body is checked first by the
contract's msgspec structs (service/contracts/fast.py) and validated by the
pydantic models only when they refuse it, so every error still comes from
the models.

A batch in the plain form (nearly every batch) takes a shorter path with the
same outcome: decode_plain reads its envelopes in one msgspec pass with each
body kept as the client's bytes, prepare_plain decodes each body into the
fast structs and stores those bytes as they are (re-encoded only where
redaction changed a text). At the first event that path would not accept as
written it gives up and the full path above judges the whole batch.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import orjson
from pydantic import ValidationError

from service.api import wire  # module, not names: wire imports this module too
from service.api.producer import OutgoingRecord
from service.api.redaction import Redactor, identifier_key
from service.contracts import BODY_MODELS, EventEnvelope
from service.contracts import topics as T
from service.contracts import vocabulary as L
from service.contracts.batchrules import EMBEDDING_DIMS_RULE, EmbeddingDimensions
from service.contracts.errors import describe_errors
from service.contracts.fast import (
    BODIES,
    PlainEnvelope,
    check_body,
    plain_batch_decoder,
    rules_hold,
)
from service.contracts.topics import Topics, record_key


class IngestError(Exception):
    """A whole-request refusal: status plus a message naming the field and the rule."""

    def __init__(
        self, status: int, message: str, *, field: str | None = None, rule: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.rule = rule

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.message}
        if self.field:
            out["field"] = self.field
        if self.rule:
            out["rule"] = self.rule
        return out


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
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise IngestError(400, f"body is not valid gzip: {exc}", field="body", rule="gzip") from exc
    if len(out) > limit or inflater.unconsumed_tail:
        raise IngestError(
            413, f"decompressed body exceeds {limit} bytes", field="body", rule="max_decompressed_bytes"
        )
    if not inflater.eof:
        raise IngestError(400, "gzip body is truncated", field="body", rule="gzip")
    return out


def _nan_tolerant_loads(data: bytes) -> Any:
    # orjson rejects NaN/Infinity as invalid JSON; parse them here so the
    # error can name the field holding them instead of a byte offset.
    return json.loads(data, parse_constant=lambda c: float(c.replace("Infinity", "inf")))


def check_shape(data: bytes, max_events: int) -> None:
    """Depth and event count from the bytes, before the parser builds anything (a body of
    millions of `{}` or nested arrays is refused in milliseconds instead of built)."""
    shape = wire.json_shape(data, (2,))
    if shape.max_depth > L.MAX_JSON_DEPTH:
        raise IngestError(
            400,
            f"body nests {shape.max_depth} levels deep; at most {L.MAX_JSON_DEPTH}",
            field="body",
            rule="max_json_depth",
        )
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


@dataclass(slots=True)
class EventResult:
    index: int
    id: str | None
    type: str
    status: str = "accepted"
    error: str | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "status": self.status, "error": self.error}


@dataclass
class PreparedBatch:
    results: list[EventResult]
    records: list[OutgoingRecord]
    redactions: Counter[str] = field(default_factory=Counter)

    @property
    def rejected(self) -> list[EventResult]:
        return [r for r in self.results if r.status == "rejected"]


_TEXT_KEYS = ("text", "note", "description")
_SCHEMA_HEADER = (T.H_SCHEMA, str(L.SCHEMA_VERSION).encode())

# The envelope as nearly every client writes it: a canonical (lower-case, hyphenated) UUID and an
# RFC 3339 timestamp. Such an envelope is read directly; pydantic's EventEnvelope, which would give
# the same values, still judges every other form (and names what is wrong).
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


def _key_part(etype: str, body: Any) -> str:
    """record_key's part of a body read by the fast structs."""
    if etype == "trace":
        return body.request_id
    if etype in ("feedback", "label"):
        return body.trace_id
    return body.variant


def _capped(text: str, limit: int) -> str:
    # A mark is longer than what it replaces: a text at its field's limit must still fit it once
    # redacted, or the workers' views would refuse the stored record (accepted, then lost).
    return text if len(text) <= limit else text[:limit]


def redact_value(value: Any, redactor: Redactor, counts: Counter[str], tenant: str) -> Any:
    """A metadata or predicate value with keyed marks in its strings (also inside a list)."""
    if isinstance(value, str):
        return _capped(redactor.redact_value(value, counts, tenant), L.MAX_METADATA_STR_LEN)
    if isinstance(value, list):
        return [redact_value(v, redactor, counts, tenant) if isinstance(v, str) else v for v in value]
    return value


def redact_metadata(holder: Any, redactor: Redactor, counts: Counter[str], tenant: str) -> None:
    metadata = holder.get("metadata") if isinstance(holder, dict) else None
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            if not identifier_key(key):
                metadata[key] = redact_value(value, redactor, counts, tenant)


def redact_body(
    event_type: str, body: dict[str, Any], redactor: Redactor, counts: Counter[str], tenant: str
) -> None:
    """Redact a validated body in place: its free texts, metadata and predicate values, session id.
    _redacted (the plain path) changes the same fields in the same way."""
    if event_type == "trace":
        for holder, limit in (
            (body.get("query"), L.MAX_QUERY_CHARS),
            (body.get("answer"), L.MAX_ANSWER_CHARS),
        ):
            if isinstance(holder, dict) and isinstance(holder.get("text"), str):
                holder["text"] = _capped(redactor.redact(holder["text"], counts), limit)
        retrieval = body.get("retrieval") or {}
        for doc in retrieval.get("documents") or []:
            if isinstance(doc, dict) and isinstance(doc.get("text"), str):
                doc["text"] = _capped(redactor.redact_document(doc["text"], counts), L.MAX_DOCUMENT_CHARS)
            redact_metadata(doc, redactor, counts, tenant)
        for side in ("entitlement", "relevance"):
            for predicate in (retrieval.get("filters") or {}).get(side) or []:
                if (
                    isinstance(predicate, dict)
                    and "value" in predicate
                    and not identifier_key(predicate["field"])
                ):
                    predicate["value"] = redact_value(predicate["value"], redactor, counts, tenant)
        for candidate in (retrieval.get("exclusion_sample") or {}).get("candidates") or []:
            redact_metadata(candidate, redactor, counts, tenant)
        if isinstance(body.get("session_id"), str):
            body["session_id"] = redactor.pseudonyms.identifier(tenant, body["session_id"])
    elif event_type in ("label", "release"):
        for k in _TEXT_KEYS:
            if isinstance(body.get(k), str):
                body[k] = _capped(redactor.redact(body[k], counts), L.MAX_NOTE_CHARS)


class BatchPreparer:
    def __init__(
        self,
        topics: Topics,
        redactor: Redactor | None,
        max_age_s: float,
        max_skew_s: float,
        max_events: int = 1000,
    ) -> None:
        self.topics = topics
        self._topic = {etype: topics.for_event(etype) for etype in BODY_MODELS}
        self.redactor = redactor
        self.max_age = timedelta(seconds=max_age_s)
        self.max_skew = timedelta(seconds=max_skew_s)
        self._plain_batch = plain_batch_decoder(max_events)
        self._body_decoders = {etype: msgspec.json.Decoder(view) for etype, view in BODIES.items()}
        # Header tuples are shared between records: kafka-python only reads them.
        self._type_header = {etype: (T.H_EVENT_TYPE, etype.encode()) for etype in BODY_MODELS}
        self._type_part = {etype: b'","type":"' + etype.encode() for etype in BODY_MODELS}

    def decode_plain(self, data: bytes) -> list[PlainEnvelope] | None:
        """The events of a batch in the plain form (only `events`, 1 to max_events envelopes of
        exactly type, canonical id, RFC 3339 timestamp and an object body), bodies not yet read;
        None for any other body, which the full path (parse_envelope, prepare) then judges."""
        try:
            return self._plain_batch.decode(data).events
        except (
            msgspec.DecodeError,
            RecursionError,
        ):  # ValidationError included; too deep: the full path says so
            return None

    def prepare_plain(
        self, events: list[PlainEnvelope], tenant: str, traceparent: bytes | None, now: datetime | None = None
    ) -> PreparedBatch | None:
        """The batch when every event of it is accepted as written; None as soon as one is not
        (its body breaks the fast structs' rules, its timestamp is out of the window, its id repeats,
        or it names a tenant): the full path then judges every event and names what is wrong.

        An accepted body is stored as the client's bytes (no second parse and encoding) unless
        redaction changes one of its texts. The fast structs are never looser than the models and
        refuse what orjson would read differently (integers past 64 bits, lone surrogates), so the
        stored record holds the same values as the full path's: tests/service/api/test_plain_batch.py
        holds the two paths to the same records.
        """
        now = now or datetime.now(UTC)
        oldest, newest = now - self.max_age, now + self.max_skew
        batch = PreparedBatch([], [])
        ids = "\n".join([env.id for env in events])
        if len(ids) != (L.UUID_TEXT_LEN + 1) * len(events) - 1 or _CANONICAL_UUIDS.fullmatch(ids) is None:
            return None  # an id not in the canonical form (UUID_TEXT_LEN characters each, so none holds a line break)
        # What every stored record and header list of this batch shares, built once.
        tenant_part = b'","tenant":' + orjson.dumps(tenant) + b',"timestamp":"'
        received_part = b'","received_at":"' + now.isoformat().encode() + b'","body":'
        shared_headers = [(T.H_TENANT, tenant.encode()), _SCHEMA_HEADER]
        if traceparent:
            shared_headers.append(("traceparent", traceparent))
        key_prefix = tenant + "/"
        records, results, counts = batch.records, batch.results, batch.redactions
        seen: set[str] = set()
        dims = EmbeddingDimensions()
        for i, env in enumerate(events):
            etype, event_id = env.type, env.id
            if event_id in seen:
                return None
            seen.add(event_id)
            timestamp = canonical_timestamp(env.timestamp)
            if timestamp is None:
                return None
            try:
                ts = datetime.fromisoformat(env.timestamp)
                body = self._decode_body(etype, env.body)
            except (ValueError, msgspec.DecodeError, RecursionError):  # ValidationError included
                return None
            if ts < oldest or ts > newest or not rules_hold(etype, body):
                return None
            if etype == "trace":
                query = body.query
                if dims.conflict(i, query.embedding_model, query.embedding) is not None:
                    return None
                dims.accept(i, query.embedding_model, query.embedding)
            raw = (
                self._redacted(etype, body, env.body, counts, tenant)
                if self.redactor is not None
                else env.body
            )
            id_bytes = event_id.encode()
            stored = b"".join(
                (
                    b'{"schema_version":1,"id":"',
                    id_bytes,
                    self._type_part[etype],
                    tenant_part,
                    timestamp.encode(),
                    received_part,
                    raw,
                    b"}",
                )
            )
            headers = [(T.H_EVENT_ID, id_bytes), self._type_header[etype], *shared_headers]
            key = (key_prefix + _key_part(etype, body)).encode()
            records.append(OutgoingRecord(self._topic[etype], key, stored, headers))
            results.append(EventResult(i, event_id, etype))
        return batch

    def _decode_body(self, etype: str, raw: msgspec.Raw) -> Any:
        return self._body_decoders[etype].decode(raw)

    def _redacted(self, etype: str, body: Any, raw: msgspec.Raw, counts: Counter[str], tenant: str) -> Any:
        """The body's bytes redacted as redact_body redacts them: the client's bytes when nothing changed."""
        redactor = self.redactor
        assert redactor is not None
        changed: list[tuple[tuple[Any, ...], Any]] = []

        def value(path: tuple[Any, ...], old: Any) -> None:
            new = redact_value(old, redactor, counts, tenant)
            if new != old:
                changed.append((path, new))

        if etype == "trace":
            for where, holder, limit in (
                ("query", body.query, L.MAX_QUERY_CHARS),
                ("answer", body.answer, L.MAX_ANSWER_CHARS),
            ):
                text = _capped(redactor.redact(holder.text, counts), limit)
                if text != holder.text:
                    changed.append(((where, "text"), text))
            retrieval = body.retrieval
            for j, doc in enumerate(retrieval.documents):
                text = _capped(redactor.redact_document(doc.text, counts), L.MAX_DOCUMENT_CHARS)
                if text != doc.text:
                    changed.append((("retrieval", "documents", j, "text"), text))
                for key, old in doc.metadata.items():
                    if not identifier_key(key):
                        value(("retrieval", "documents", j, "metadata", key), old)
            for side in ("entitlement", "relevance"):
                for k, predicate in enumerate(getattr(retrieval.filters, side)):
                    if not identifier_key(predicate.field):
                        value(("retrieval", "filters", side, k, "value"), predicate.value)
            if retrieval.exclusion_sample is not None:
                for c, candidate in enumerate(retrieval.exclusion_sample.candidates):
                    for key, old in candidate.metadata.items():
                        if not identifier_key(key):
                            value(("retrieval", "exclusion_sample", "candidates", c, "metadata", key), old)
            if body.session_id is not None:
                changed.append((("session_id",), redactor.pseudonyms.identifier(tenant, body.session_id)))
        elif etype in ("label", "release"):
            key = "note" if etype == "label" else "description"
            old = getattr(body, key)
            if old is not None and (text := _capped(redactor.redact(old, counts), L.MAX_NOTE_CHARS)) != old:
                changed.append(((key,), text))
        if not changed:
            return raw
        doc = orjson.loads(memoryview(raw))
        for path, new in changed:
            holder = doc
            for step in path[:-1]:
                holder = holder[step]
            holder[path[-1]] = new
        return orjson.dumps(doc)

    def prepare(
        self, events: list[Any], tenant: str, traceparent: bytes | None, now: datetime | None = None
    ) -> PreparedBatch:
        now = now or datetime.now(UTC)
        received_at = now.isoformat()
        batch = PreparedBatch([], [])
        seen: dict[str, int] = {}
        dims = EmbeddingDimensions()
        for i, raw in enumerate(events):
            result, record = self._prepare_one(
                i, raw, tenant, now, received_at, (seen, dims), batch.redactions, traceparent
            )
            batch.results.append(result)
            if record is not None:
                batch.records.append(record)
        return batch

    def _prepare_one(
        self,
        i: int,
        raw: Any,
        tenant: str,
        now: datetime,
        received_at: str,
        batch_state: tuple[dict[str, int], EmbeddingDimensions],
        redactions: Counter[str],
        traceparent: bytes | None,
    ) -> tuple[EventResult, OutgoingRecord | None]:
        seen, dims = batch_state
        etype = raw.get("type") if isinstance(raw, dict) else None
        label = (
            etype if isinstance(etype, str) and etype in BODY_MODELS else "unknown"
        )  # [] or {} are unhashable
        if not isinstance(raw, dict):
            return EventResult(
                i, None, label, "rejected", f"events[{i}]: must be an object (type)", "invalid"
            ), None
        plain = plain_envelope(raw)
        if plain is not None:
            etype, event_id, ts, body = plain
        else:
            raw_id = raw.get("id") if isinstance(raw.get("id"), str) else None
            try:
                env = EventEnvelope.model_validate(raw)
            except ValidationError as exc:
                reason = "unknown_type" if any(e["loc"] == ("type",) for e in exc.errors()) else "invalid"
                return EventResult(
                    i, raw_id, label, "rejected", describe_errors(f"events[{i}]", exc), reason
                ), None
            etype, event_id, ts, body = env.type, str(env.id), env.timestamp, env.body
        if not check_body(etype, body):  # the fast check; pydantic says why, or admits a coercion
            try:
                BODY_MODELS[etype].model_validate(body)
            except ValidationError as exc:
                return (
                    EventResult(
                        i, event_id, label, "rejected", describe_errors(f"events[{i}].body", exc), "invalid"
                    ),
                    None,
                )
        if ts < now - self.max_age or ts > now + self.max_skew:
            msg = (
                f"events[{i}].timestamp: {ts.isoformat()} is outside the accepted window "
                f"[now - {self.max_age}, now + {self.max_skew}] (timestamp_window)"
            )
            return EventResult(i, event_id, label, "rejected", msg, "timestamp_out_of_window"), None
        if event_id in seen:
            msg = f"events[{i}].id: duplicates events[{seen[event_id]}].id in this batch (unique_id)"
            return EventResult(i, event_id, label, "rejected", msg, "duplicate_id"), None
        query = body.get("query") if etype == "trace" else None
        model, vector = (
            (query.get("embedding_model"), query.get("embedding"))
            if isinstance(query, dict)
            else (None, None)
        )
        conflict = dims.conflict(i, model, vector)
        if conflict is not None:
            return EventResult(i, event_id, label, "rejected", conflict, EMBEDDING_DIMS_RULE), None
        dims.accept(i, model, vector)
        seen[event_id] = i
        if self.redactor is not None:
            redact_body(etype, body, self.redactor, redactions, tenant)
        stored = {
            "schema_version": 1,
            "id": event_id,
            "type": etype,
            "tenant": tenant,
            "timestamp": ts.isoformat(),
            "received_at": received_at,
            "body": body,
        }
        headers = [
            (T.H_EVENT_ID, event_id.encode()),
            (T.H_EVENT_TYPE, etype.encode()),
            (T.H_TENANT, tenant.encode()),
            (T.H_SCHEMA, b"1"),
        ]
        if traceparent:
            headers.append(("traceparent", traceparent))
        record = OutgoingRecord(
            self._topic[etype], record_key(etype, tenant, body), orjson.dumps(stored), headers
        )
        return EventResult(i, event_id, etype), record
