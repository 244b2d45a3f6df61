"""A table of bad inputs to POST /v1/events: exact status, a message naming the field and the rule,
and nothing produced.

Every row runs against one API whose topics must stay empty for the whole
module: a record appearing there after any row is a rejected event that leaked.
"""

from __future__ import annotations

import gzip
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from service.contracts import vocabulary as L
from tests.service.api.api_events import (
    ACME_KEY,
    GLOBEX_KEY,
    event,
    feedback_event,
    now_iso,
    trace_body,
    trace_event,
)
from tests.service.api.api_harness import TEST_LIMITS, KafkaReader, RunningApi


@dataclass
class Bad:
    """One bad request: `request` returns RunningApi.post keyword arguments.

    Whole-request refusals answer {"error", "field", "rule"}; per-event refusals
    answer 400 with one result per event whose `error` names the field and rule.
    """

    request: Callable[[], dict[str, Any]]
    status: int
    message: str  # regex: matched against body["error"], or results[0]["error"] when per_event
    field: str | None = None
    rule: str | None = None
    per_event: bool = False


def raw_event_json(body_json: str, *, etype: str = "trace", timestamp: str | None = None) -> bytes:
    """An envelope written by hand, for what a JSON encoder would never produce (NaN, lone surrogates)."""
    ts = timestamp or now_iso()
    return (
        f'{{"events": [{{"type": "{etype}", "id": "{uuid.uuid4()}", "timestamp": "{ts}", '
        f'"body": {body_json}}}]}}'
    ).encode()


def events(*evs: Any) -> Callable[[], dict[str, Any]]:
    return lambda: {"events": list(evs)}


def with_trace(**body: Any) -> Callable[[], dict[str, Any]]:
    return lambda: {"events": [trace_event(**body)]}


def without(key: str) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        body = trace_body()
        del body[key]
        return {"events": [event("trace", body)]}

    return build


def gzip_bomb() -> dict[str, Any]:
    inflated = b'{"events": [' + b" " * (4 * TEST_LIMITS["max_decompressed_bytes"]) + b"]}"
    return {"content": gzip.compress(inflated), "headers": {"Content-Encoding": "gzip"}}


TOO_OLD = now_iso(-(L.MAX_EVENT_AGE_S + 3600))
TOO_NEW = now_iso(L.MAX_CLOCK_SKEW_S + 3600)

CASES: dict[str, Bad] = {
    # -- envelope ---------------------------------------------------------
    "malformed-json": Bad(
        lambda: {"content": b'{"events": [{"type": "trace"'},
        400,
        r"^body is not valid JSON: ",
        "body",
        "json",
    ),
    "not-an-object": Bad(
        lambda: {"body": [trace_event()]},
        400,
        r"^body must be a JSON object with an 'events' list$",
        "body",
        "object",
    ),
    "events-not-a-list": Bad(
        lambda: {"body": {"events": "trace"}}, 400, r"^'events' must be a list of events$", "events", "list"
    ),
    "no-events": Bad(
        lambda: {"body": {"events": []}},
        400,
        r"^'events' is empty; send at least one event$",
        "events",
        "min_length",
    ),
    "unknown-top-level-field": Bad(
        lambda: {"body": {"events": [trace_event()], "tenant_id": "acme"}},
        400,
        r"^unknown top-level field 'tenant_id'; only 'events' is allowed$",
        "tenant_id",
        "extra_forbidden",
    ),
    "event-not-an-object": Bad(
        events("trace"), 400, r"^events\[0\]: must be an object \(type\)$", per_event=True
    ),
    "lone-surrogate": Bad(
        lambda: {
            "content": raw_event_json('{"trace_id": "t", "request_id": "r", "query": {"text": "a\\ud800b"}}')
        },
        400,
        r"^body is not valid JSON: ",
        "body",
        "json",
    ),
    "lone-surrogate-in-a-field-name": Bad(
        lambda: {"content": b'{"\\ud800": 1, "events": []}'},
        400,
        r"^body is not valid JSON: ",
        "body",
        "json",
    ),
    "nan-beside-an-integer-over-64-bits": Bad(
        lambda: {
            "content": raw_event_json(
                '{"trace_id": "t", "request_id": "r", "sample_rate": NaN, '
                '"query": {"text": "q"}, "retrieval": {"documents": [{"id": "d", '
                '"text": "x", "metadata": {"n": 100000000000000000000000000}}]}}'
            )
        },
        400,
        r"^body is not valid JSON: ",
        "body",
        "json",
    ),
    # -- wrong types and missing fields -------------------------------------
    "wrong-type-number": Bad(
        with_trace(sample_rate="high"),
        400,
        r"^events\[0\]\.body\.sample_rate: Input should be a valid number.* \(float_parsing\)$",
        per_event=True,
    ),
    "wrong-type-string": Bad(
        with_trace(query={"text": 42}),
        400,
        r"^events\[0\]\.body\.query\.text: Input should be a valid string \(string_type\)$",
        per_event=True,
    ),
    "wrong-type-list": Bad(
        with_trace(retrieval={"documents": {"id": "kb-1", "text": "t"}}),
        400,
        r"^events\[0\]\.body\.retrieval\.documents: Input should be a valid list \(list_type\)$",
        per_event=True,
    ),
    "missing-body-field": Bad(
        without("request_id"),
        400,
        r"^events\[0\]\.body\.request_id: Field required \(missing\)$",
        per_event=True,
    ),
    "missing-envelope-field": Bad(
        lambda: {"events": [{k: v for k, v in trace_event().items() if k != "id"}]},
        400,
        r"^events\[0\]\.id: Field required \(missing\)$",
        per_event=True,
    ),
    "unknown-body-field": Bad(
        with_trace(qurey={"text": "typo"}),
        400,
        r"^events\[0\]\.body\.qurey: Extra inputs are not permitted \(extra_forbidden\)$",
        per_event=True,
    ),
    "bad-uuid": Bad(
        lambda: {"events": [trace_event() | {"id": "not-a-uuid"}]},
        400,
        r"^events\[0\]\.id: Input should be a valid UUID.* \(uuid_parsing\)$",
        per_event=True,
    ),
    # -- numbers -----------------------------------------------------------
    "nan": Bad(
        lambda: {
            "content": raw_event_json(
                '{"trace_id": "t", "request_id": "r", "sample_rate": NaN, "query": {"text": "q"}}'
            )
        },
        400,
        r"^events\[0\]\.body\.sample_rate: Input should be a finite number \(finite_number\)$",
        per_event=True,
    ),
    "infinity": Bad(
        lambda: {
            "content": raw_event_json(
                '{"trace_id": "t", "request_id": "r", "query": {"text": "q"}, '
                '"retrieval": {"documents": [{"id": "d", "text": "x", '
                '"score": -Infinity}]}}'
            )
        },
        400,
        r"^events\[0\]\.body\.retrieval\.documents\[0\]\.score: Input should be a finite number "
        r"\(finite_number\)$",
        per_event=True,
    ),
    "sample-rate-zero": Bad(
        with_trace(sample_rate=0),
        400,
        r"^events\[0\]\.body\.sample_rate: Input should be greater than 0 \(greater_than\)$",
        per_event=True,
    ),
    # -- sizes -------------------------------------------------------------
    "oversized-text": Bad(
        with_trace(query={"text": "q" * (L.MAX_QUERY_CHARS + 1)}),
        400,
        rf"^events\[0\]\.body\.query\.text: String should have at most {L.MAX_QUERY_CHARS} "
        r"characters \(string_too_long\)$",
        per_event=True,
    ),
    "too-many-documents": Bad(
        with_trace(
            retrieval={"documents": [{"id": f"d{i}", "text": "t"} for i in range(L.MAX_DOCUMENTS + 1)]}
        ),
        400,
        rf"^events\[0\]\.body\.retrieval\.documents: List should have at most "
        rf"{L.MAX_DOCUMENTS} items after validation, not {L.MAX_DOCUMENTS + 1} \(too_long\)$",
        per_event=True,
    ),
    "too-many-events": Bad(
        lambda: {"events": [feedback_event() for _ in range(TEST_LIMITS["max_events_per_batch"] + 1)]},
        413,
        rf"^{TEST_LIMITS['max_events_per_batch'] + 1} events in one batch; at most "
        rf"{TEST_LIMITS['max_events_per_batch']}$",
        "events",
        "max_length",
    ),
    "body-too-large": Bad(
        lambda: {"content": b'{"events": ["' + b"x" * TEST_LIMITS["max_body_bytes"] + b'"]}'},
        413,
        rf"^body of \d+ bytes exceeds {TEST_LIMITS['max_body_bytes']} bytes$",
        "body",
        "max_body_bytes",
    ),
    "gzip-bomb": Bad(
        gzip_bomb,
        413,
        rf"^decompressed body exceeds {TEST_LIMITS['max_decompressed_bytes']} bytes$",
        "body",
        "max_decompressed_bytes",
    ),
    "not-gzip": Bad(
        lambda: {"content": b"plain text", "headers": {"Content-Encoding": "gzip"}},
        400,
        r"^body is not valid gzip: ",
        "body",
        "gzip",
    ),
    "truncated-gzip": Bad(
        lambda: {
            "content": gzip.compress(orjson.dumps({"events": [trace_event()]}))[:-12],
            "headers": {"Content-Encoding": "gzip"},
        },
        400,
        r"^gzip body is truncated$",
        "body",
        "gzip",
    ),
    # -- event semantics ---------------------------------------------------
    "unknown-event-type": Bad(
        lambda: {"events": [event("span", trace_body())]},
        400,
        r"^events\[0\]\.type: Input should be 'trace', 'feedback', 'release' or 'label' "
        r"\(literal_error\)$",
        per_event=True,
    ),
    "type-not-a-string": Bad(
        lambda: {"events": [trace_event() | {"type": []}]},
        400,
        r"^events\[0\]\.type: Input should be 'trace', 'feedback', 'release' or 'label' "
        r"\(literal_error\)$",
        per_event=True,
    ),
    "timestamp-too-old": Bad(
        lambda: {"events": [trace_event() | {"timestamp": TOO_OLD}]},
        400,
        r"^events\[0\]\.timestamp: .* is outside the accepted window \[now - 7 days, 0:00:00, "
        r"now \+ 0:05:00\] \(timestamp_window\)$",
        per_event=True,
    ),
    "timestamp-in-the-future": Bad(
        lambda: {"events": [trace_event() | {"timestamp": TOO_NEW}]},
        400,
        r"^events\[0\]\.timestamp: .* is outside the accepted window .*"
        r"\(timestamp_window\)$",
        per_event=True,
    ),
    "timestamp-without-offset": Bad(
        lambda: {"events": [trace_event() | {"timestamp": "2026-01-01T12:00:00"}]},
        400,
        r"^events\[0\]\.timestamp: Value error, timestamp needs a timezone offset "
        r"\(RFC 3339\).* \(value_error\)$",
        per_event=True,
    ),
    "release-component-unknown": Bad(
        lambda: {"events": [event("release", {"release": "r1", "component": "vibes", "to": "v2"})]},
        400,
        r"^events\[0\]\.body\.component: Input should be 'app', 'generator_model', .* or 'provider' "
        r"\(literal_error\)$",
        per_event=True,
    ),
    "release-component-without-to": Bad(
        lambda: {"events": [event("release", {"release": "r1", "component": "index", "from": "idx-1"})]},
        400,
        r"^events\[0\]\.body: Value error, 'to': required when component is 'index' "
        r"\(the version now serving\) \(value_error\)$",
        per_event=True,
    ),
    "predicate-op-unknown": Bad(
        with_trace(
            retrieval={"filters": {"relevance": [{"field": "locale", "op": "like", "value": "en-%"}]}}
        ),
        400,
        r"^events\[0\]\.body\.retrieval\.filters\.relevance\[0\]\.op: Input should be 'eq', 'neq', .* or 'exists' "
        r"\(literal_error\)$",
        per_event=True,
    ),
    "predicate-value-does-not-fit-op": Bad(
        with_trace(retrieval={"filters": {"entitlement": [{"field": "region", "op": "in", "value": "eu"}]}}),
        400,
        r"^events\[0\]\.body\.retrieval\.filters\.entitlement\[0\]: Value error, op 'in' needs a list value "
        r"\(value_error\)$",
        per_event=True,
    ),
    "embedding-without-model": Bad(
        with_trace(query={"text": "q", "embedding": [0.1, 0.2, 0.3]}),
        400,
        r"^events\[0\]\.body\.query: Value error, embedding_model is required with "
        r"embedding.* \(value_error\)$",
        per_event=True,
    ),
    # -- transport and auth ------------------------------------------------
    "wrong-content-type": Bad(
        lambda: {"events": [trace_event()], "headers": {"Content-Type": "text/plain"}},
        415,
        r"^Content-Type must be application/json, got 'text/plain'$",
        "Content-Type",
        "application/json",
    ),
    "form-content-type": Bad(
        lambda: {"events": [trace_event()], "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
        415,
        r"^Content-Type must be application/json",
        "Content-Type",
        "application/json",
    ),
    "unsupported-encoding": Bad(
        lambda: {"events": [trace_event()], "headers": {"Content-Encoding": "deflate"}},
        415,
        r"^Content-Encoding 'deflate' is not supported",
        "Content-Encoding",
        "gzip_or_identity",
    ),
    "missing-key": Bad(
        lambda: {"events": [trace_event()], "key": None},
        401,
        r"^Authorization header missing",
        None,
        "api_key",
    ),
    "bad-key": Bad(
        lambda: {"events": [trace_event()], "key": ACME_KEY + "x"},
        401,
        r"^API key not recognised$",
        None,
        "api_key",
    ),
    "empty-bearer": Bad(
        lambda: {"events": [trace_event()], "key": None, "headers": {"Authorization": "Bearer"}},
        401,
        r"^Authorization header must be 'Bearer <api key>'$",
        None,
        "api_key",
    ),
    "body-names-another-tenant": Bad(
        lambda: {"events": [trace_event(tenant="globex")]},
        403,
        r"^events\[0\]\.body\.tenant names tenant 'globex' but the API key belongs to "
        r"'acme'; the tenant is taken from the key$",
        "events[0].body.tenant",
        "tenant_from_key",
    ),
    "envelope-names-another-tenant": Bad(
        lambda: {"events": [trace_event() | {"tenant": "acme"}], "key": GLOBEX_KEY},
        403,
        r"^events\[0\]\.tenant names tenant 'acme' but the API key belongs to "
        r"'globex'",
        "events[0].tenant",
        "tenant_from_key",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_input_is_refused_by_name_and_nothing_is_produced(
    module_api: RunningApi, kafka: KafkaReader, case: Bad
) -> None:
    kwargs = case.request()
    r = module_api.post(**kwargs)

    assert r.status_code == case.status, r.text
    body = r.json()
    if case.per_event:
        assert body["error"] == "no event in the batch is valid; see results"
        assert body["accepted"] == 0
        assert all(x["status"] == "rejected" for x in body["results"])
        assert re.search(case.message, body["results"][0]["error"]), body["results"][0]["error"]
    else:
        assert re.search(case.message, body["error"]), body["error"]
        assert body.get("field") == case.field
        assert body.get("rule") == case.rule
        assert "accepted" not in body
    assert kafka.event_records(module_api.topics) == []


def test_a_duplicate_id_is_refused_after_its_first_occurrence(api: RunningApi, kafka: KafkaReader) -> None:
    first = trace_event()
    again = trace_event()
    again["id"] = first["id"]
    r = api.post([first, again])
    assert r.status_code == 207
    assert r.json()["results"][1] == {
        "index": 1,
        "id": first["id"],
        "status": "rejected",
        "error": "events[1].id: duplicates events[0].id in this batch (unique_id)",
    }
    [stored] = kafka.values(api.topics.traces)
    assert stored["body"] == first["body"]  # the first occurrence, not the duplicate
