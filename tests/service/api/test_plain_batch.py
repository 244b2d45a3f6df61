"""The plain-batch path of POST /v1/events (decode_plain, prepare_plain) against the full path.

The plain path reads a batch in one pass and stores each body as the client's bytes; it may
decline any batch (the full path then judges it), but a batch it takes must give exactly the full
path's records: same topics, keys, headers and, once parsed, the same stored values.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.api.ingest import BatchPreparer, PreparedBatch
from service.api.ingest_body import check_tenant_fields, parse_envelope
from service.api.ingest_errors import IngestError
from service.api.redaction import Pseudonymizer, Redactor
from service.contracts import Topics
from service.contracts.vocabulary import MAX_CLOCK_SKEW_S, MAX_EVENT_AGE_S
from tests.service.api.api_events import feedback_event, label_event, now_iso, release_event, trace_event
from tests.service.api.mutation import any_text, json_values, set_path, value_paths

TENANT = "acme"
PSEUDONYM_KEY = b"plain-batch-test-key-0123456789"


def _preparer(redact: bool = True) -> BatchPreparer:
    # One pseudonym key for both paths: without one each preparer would draw its own.
    redactor = Redactor(pseudonyms=Pseudonymizer(PSEUDONYM_KEY)) if redact else None
    return BatchPreparer(Topics("t"), redactor, MAX_EVENT_AGE_S, MAX_CLOCK_SKEW_S, 20)


def _full(preparer: BatchPreparer, data: bytes, now: datetime | None = None) -> PreparedBatch | None:
    try:
        events = parse_envelope(data, 20)
        check_tenant_fields(events, TENANT)
    except IngestError:
        return None
    return preparer.prepare(events, TENANT, b"00-tp", now=now)


def _plain(preparer: BatchPreparer, data: bytes, now: datetime | None = None) -> PreparedBatch | None:
    events = preparer.decode_plain(data)
    return None if events is None else preparer.prepare_plain(events, TENANT, b"00-tp", now=now)


def _records(batch: PreparedBatch) -> list[tuple[str, bytes, list[tuple[str, bytes]], Any]]:
    return [(r.topic, r.key, r.headers, orjson.loads(r.value)) for r in batch.records]


def _agree(data: bytes, redact: bool = True) -> bool:
    """True when the plain path took the batch (and then it agrees with the full path)."""
    now = datetime.now(UTC)  # both paths judge the time window (and write received_at) at one instant
    plain = _plain(_preparer(redact), data, now)
    if plain is None:
        return False
    full = _full(_preparer(redact), data, now)
    assert full is not None and not full.rejected, "the plain path took a batch the full path refuses"
    assert [r.as_dict() for r in plain.results] == [r.as_dict() for r in full.results]
    assert _records(plain) == _records(full)
    assert plain.redactions == full.redactions
    return True


def _batch(*events: dict[str, Any]) -> bytes:
    return json.dumps({"events": list(events)}).encode()


def test_every_event_type_in_the_plain_form_takes_the_plain_path() -> None:
    data = _batch(
        trace_event(),
        feedback_event(),
        release_event(),
        label_event(),
        feedback_event(kind="dwell", value=12.5, reason=None),
        trace_event(variant="rerank-v2"),
    )
    assert _agree(data)
    assert _agree(data, redact=False)


def test_a_body_whose_text_is_redacted_is_stored_as_the_full_path_stores_it() -> None:
    ev = trace_event(query={"text": "mail me at jane.doe@example.com or call +1 415 555 0100"})
    ev["body"]["retrieval"]["documents"][1]["text"] = "Card 4111 1111 1111 1111 on file."
    label = label_event(note="asked by jane.doe@example.com")
    assert _agree(_batch(ev, label, release_event(description="owner bob@example.org")))
    stored = orjson.loads(_plain(_preparer(), _batch(ev)).records[0].value)  # type: ignore[union-attr]
    assert "jane.doe@example.com" not in json.dumps(stored)


@pytest.mark.parametrize(
    "data",
    [
        # Declined: the full path names the problem (or reads the value differently).
        b'{"events": [], "x": 1}',
        b'{"events": []}',
        json.dumps({"events": [trace_event(tenant="acme")]}).encode(),  # a tenant in the body
        json.dumps({"events": [{**trace_event(), "tenant": "acme"}]}).encode(),
        json.dumps({"events": [trace_event(sample_rate=float("nan"))]}).encode(),  # bare NaN
        json.dumps({"events": [trace_event(intent="\ud800")]}).encode(),  # a lone surrogate
        json.dumps({"events": [trace_event(sample_rate="0.5")]}).encode(),  # pydantic coerces it
        _batch(trace_event(), {**trace_event(), "timestamp": "2001-01-01T00:00:00Z"}),  # out of the window
        _batch({**trace_event(), "id": "6F9619FF-8B86-D011-B42D-00C04FC964FF"}),  # not canonical
        _batch({**trace_event(), "timestamp": now_iso()[:19]}),  # no offset
    ],
)
def test_what_the_plain_path_declines(data: bytes) -> None:
    assert not _agree(data)


def test_a_repeated_id_and_a_big_integer_are_declined() -> None:
    ev = trace_event()
    assert not _agree(_batch(ev, ev))
    big = trace_event()
    big["body"]["retrieval"]["documents"][0]["metadata"]["n"] = 2**64  # orjson reads it as a float
    assert not _agree(_batch(big))
    for long in (-(2**63) - 1, 2**63, 2**64 - 1):  # past int64: the full path decides
        big["body"]["retrieval"]["documents"][0]["metadata"]["n"] = long
        assert not _agree(_batch(big))
    for where in ("predicate", "list", "candidate"):
        ev = trace_event()
        retrieval = ev["body"]["retrieval"]
        if where == "candidate":
            retrieval["exclusion_sample"] = {"candidates": [{"id": "kb-1", "metadata": {"n": 2**64}}]}
        else:
            retrieval["filters"]["relevance"][0] = {
                "field": "n",
                "op": "in" if where == "list" else "lt",
                "value": [1, 2**64] if where == "list" else 2**64,
            }
        assert _full(_preparer(), _batch(ev)) is not None
        assert not _agree(_batch(ev)), where
    near = trace_event()
    near["body"]["retrieval"]["documents"][0]["metadata"]["n"] = -(2**63)
    near["body"]["retrieval"]["filters"]["relevance"][0] = {"field": "n", "op": "lt", "value": 2**63 - 1}
    near["body"].update(trace_id="ffe77439401201328418436c2c6ae865", request_id="1823749823749823749823")
    near["body"]["query"].update(
        embedding=[0.00012345678901234567, -1.2345678901234567e-07, 3.0], embedding_model="m"
    )  # a fraction's many digits are no integer
    assert _agree(_batch(near))


def test_duplicate_keys_and_any_spacing_read_as_the_full_path_reads_them() -> None:
    ev = trace_event()
    text = json.dumps({"events": [ev]}, indent=3)
    assert _agree(text.encode())
    dup = text.replace('"intent": "billing"', '"intent": "sales", "intent": "billing"')
    assert dup != text and _agree(dup.encode())


def test_mutated_batches_are_declined_or_stored_as_the_full_path_stores_them() -> None:
    taken: Counter[bool] = Counter()

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(data=st.data())
    def mutate(data: st.DataObject) -> None:
        events = [trace_event(), feedback_event(), label_event(), release_event()]
        path = data.draw(st.sampled_from(value_paths(events)))
        if isinstance(path[-1], str) and data.draw(st.booleans()):
            path = [*path[:-1], data.draw(any_text.filter(bool))]
        set_path(events, path, data.draw(json_values))
        taken[_agree(json.dumps({"events": events}, allow_nan=True).encode())] += 1

    mutate()
    assert taken[True] and taken[False], taken  # both ways were exercised


@settings(max_examples=500, deadline=None, derandomize=True)
@given(
    text=st.from_regex(
        r"\A[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9](\.[0-9]{1,6})?"
        r"(Z|[+-][0-2][0-9]:[0-5][0-9])\Z"
    )
    | st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat())
    | st.text(max_size=40)
)
def test_the_canonical_timestamp_is_what_isoformat_writes(text: str) -> None:
    from service.api.ingest_envelope import canonical_timestamp

    got = canonical_timestamp(text)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return  # the plain path parses it too and declines
    if got is not None:
        assert got == parsed.isoformat()


def test_ids_in_one_string_are_each_checked() -> None:
    a, b = trace_event(), trace_event()
    b["id"] = a["id"] + "\n" + b["id"]  # two canonical lines in one id
    assert not _agree(_batch(b))
    assert not _agree(_batch(b, {**trace_event(), "id": ""}))
    assert not _agree(_batch({**a, "id": a["id"] + "\n"}))
    assert _agree(_batch(a, trace_event()))


def _verdict(preparer: BatchPreparer, data: bytes, path: str, now: datetime) -> Any:
    """What one path says of a batch: the refusal's (status, rule), the per-event statuses and
    rules, or None where the plain path declines (the full path then judges)."""
    try:
        batch = _plain(preparer, data, now) if path == "plain" else _full_or_raise(preparer, data, now)
    except IngestError as exc:
        return (exc.status, exc.rule)
    if batch is None:
        return None
    return [(r.status, r.reason) for r in batch.results]


def _full_or_raise(preparer: BatchPreparer, data: bytes, now: datetime) -> PreparedBatch:
    events = parse_envelope(data, 20)
    check_tenant_fields(events, TENANT)
    return preparer.prepare(events, TENANT, b"00-tp", now=now)


def test_nesting_and_embedding_dimensions_get_one_verdict_on_both_paths() -> None:
    """Mutated batches with nesting at any depth anywhere and embeddings of one model in several
    dimensions: the plain path never raises, and whatever it takes the full path takes alike;
    past MAX_JSON_DEPTH the full path refuses the body, and a second dimension rejects that trace."""
    from service.contracts.vocabulary import MAX_JSON_DEPTH

    seen: Counter[str] = Counter()

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(data=st.data())
    def mutate(data: st.DataObject) -> None:
        dims = data.draw(st.lists(st.integers(1, 4), min_size=2, max_size=3))
        events = [
            trace_event(query={"text": f"q{i}", "embedding": [0.5] * d, "embedding_model": "m"})
            for i, d in enumerate(dims)
        ]
        events.append(feedback_event())
        depth = data.draw(
            st.sampled_from([0, 1, 3, MAX_JSON_DEPTH - 10, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 3_000])
        )
        text = json.dumps({"events": events})
        if depth:
            path = data.draw(st.sampled_from(value_paths(events)))
            set_path(events, path, "@@deep@@")
            text = json.dumps({"events": events}).replace('"@@deep@@"', "[" * depth + "]" * depth)
        now = datetime.now(UTC)
        body = text.encode()
        plain, full = _verdict(_preparer(), body, "plain", now), _verdict(_preparer(), body, "full", now)
        assert plain is None or plain == full, (plain, full)
        if plain is not None:
            _agree(body)
        # The value sits 3 to 9 levels down ({events[{body{...): its nesting adds to that.
        if depth >= MAX_JSON_DEPTH - 2:
            assert full == (400, "max_json_depth")
        elif depth:
            assert full != (400, "max_json_depth")
        if not depth and len(set(dims)) > 1:
            assert plain is None
            expect = [("accepted", None) if d == dims[0] else ("rejected", "embedding_dims") for d in dims]
            assert full[: len(dims)] == expect
        seen["declined" if plain is None else "taken"] += 1
        if isinstance(full, tuple):
            seen[f"refused {full[1]}"] += 1

    mutate()
    assert seen["taken"] and seen["declined"] and seen["refused max_json_depth"], seen


def test_a_probe_trace_goes_to_the_probes_topic_on_both_paths() -> None:
    """docs/probes.md: the topic is the one place probes are kept out of every production series."""
    probe = trace_event(request_id="probe-r1", probe={"set": "billing", "query_id": "q-001"})
    data = _batch(trace_event(), probe, feedback_event())
    assert _agree(data)
    now = datetime.now(UTC)
    for batch in (_plain(_preparer(), data, now), _full(_preparer(), data, now)):
        assert batch is not None
        assert [r.topic for r in batch.records] == ["t.traces", "t.probes", "t.feedback"]
    # a trace whose mark breaks the contract is refused alone, naming the field
    bad = _full(_preparer(), _batch(trace_event(probe={"set": "Bad Set", "query_id": "q"})), now)
    assert bad is not None and bad.records == []
    assert "probe.set" in (bad.rejected[0].error or "")
