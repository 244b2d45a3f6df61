"""The ingestion pipeline of POST /v1/events, free of HTTP and Kafka.

Body bytes -> decompress (capped) -> JSON -> envelope checks (ingest_body.py) -> per-event
validation (ingest_envelope.py, the contract's structs and models), time window, duplicate ids ->
PII redaction (ingest_redact.py) -> Kafka records (service/contracts/stored.py's layout).
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

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from pydantic import ValidationError

from service.api.ingest_envelope import all_canonical, canonical_timestamp, plain_envelope
from service.api.ingest_redact import redact_body, redacted_bytes
from service.api.producer import OutgoingRecord
from service.api.redaction import Redactor
from service.contracts import BODY_MODELS, EventEnvelope
from service.contracts.batchrules import EMBEDDING_DIMS_RULE, EmbeddingDimensions
from service.contracts.errors import describe_errors
from service.contracts.fast import BODIES, PlainEnvelope, check_body, plain_batch_decoder, rules_hold
from service.contracts.stored import StoredBatch, record_headers, stored_value
from service.contracts.topics import Topics, key_part, record_key


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
        # A trace with a probe mark goes to the probes topic: the one place replayed probe queries are kept
        # out of every production series (docs/probes.md); only the probes worker reads that topic.
        self._probes_topic = topics.probes
        self.redactor = redactor
        self.max_age = timedelta(seconds=max_age_s)
        self.max_skew = timedelta(seconds=max_skew_s)
        self._plain_batch = plain_batch_decoder(max_events)
        self._body_decoders = {etype: msgspec.json.Decoder(view) for etype, view in BODIES.items()}

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
        if not all_canonical([env.id for env in events]):
            return None
        # What every stored record and header list of this batch shares, built once.
        layout = StoredBatch(tenant, now.isoformat(), traceparent)
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
                redacted_bytes(etype, body, env.body, self.redactor, counts, tenant)
                if self.redactor is not None
                else env.body
            )
            id_bytes = event_id.encode()
            stored = layout.value(id_bytes, etype, timestamp, raw)
            headers = layout.headers(id_bytes, etype)
            key = (key_prefix + key_part(etype, body)).encode()
            topic = self._probes_topic if etype == "trace" and body.probe is not None else self._topic[etype]
            records.append(OutgoingRecord(topic, key, stored, headers))
            results.append(EventResult(i, event_id, etype))
        return batch

    def _decode_body(self, etype: str, raw: msgspec.Raw) -> Any:
        return self._body_decoders[etype].decode(raw)

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
        stored = stored_value(event_id, etype, tenant, ts.isoformat(), received_at, body)
        headers = record_headers(event_id, etype, tenant, traceparent)
        topic = (
            self._probes_topic if etype == "trace" and body.get("probe") is not None else self._topic[etype]
        )
        record = OutgoingRecord(topic, record_key(etype, tenant, body), stored, headers)
        return EventResult(i, event_id, etype), record
