"""Fuzzing the running API: from its own OpenAPI document (schemathesis) and by mutating valid events
(hypothesis). No 5xx but the documented 503, and Kafka agrees with every answer.

schemathesis' pytest integration (`from_fixture`) does not run under this pytest, so the
operations' strategies are drawn inside plain hypothesis tests against the live server.
Example counts are bounded so that the module runs in well under a minute on two cores.
"""

from __future__ import annotations

import gzip
import json
import uuid
from typing import Any

import httpx
import orjson
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.service.api.api_events import ACME_KEY, feedback_event, now_iso, trace_event
from tests.service.api.api_harness import KafkaReader, RunningApi
from tests.service.api.mutation import any_text, json_values, set_path, value_paths

FUZZ = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck), print_blob=True)
CHECKS = [
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    ignored_auth,
]


class Ledger:
    """What the API answered about each event id; checked against Kafka at the end."""

    def __init__(self) -> None:
        self.accepted: set[str] = set()
        self.refused: set[str] = set()
        self.statuses: list[int] = []

    def record(self, body: Any, response: httpx.Response | Any) -> None:
        status = response.status_code
        self.statuses.append(status)
        assert status < 500 or status == 503, f"{status} {response.text[:500]}"
        if status == 503:
            assert int(response.headers["Retry-After"]) >= 1
        events = body.get("events") if isinstance(body, dict) else None
        ids = [_canonical(e.get("id")) if isinstance(e, dict) else None for e in events or []]
        if status == 202:
            assert response.json() == {"accepted": len(ids)}
            self.accepted.update(i for i in ids if i)
        elif status == 207:
            results = response.json()["results"]
            assert len(results) == len(ids)
            for i, result in zip(ids, results, strict=True):
                if i:
                    (self.accepted if result["status"] == "accepted" else self.refused).add(i)
        else:
            self.refused.update(i for i in ids if i)

    def check_kafka(self, api: RunningApi, kafka: KafkaReader) -> None:
        stored = set(kafka.event_ids(api.topics))
        assert self.accepted <= stored, self.accepted - stored
        # An id refused in one request may have been accepted in another (generated ids repeat).
        assert not (self.refused - self.accepted) & stored


def _canonical(value: Any) -> str | None:
    try:
        return str(uuid.UUID(value)) if isinstance(value, str) else None
    except ValueError:
        return None


def _fresh_timestamps(body: Any) -> None:
    """Generated timestamps fall anywhere in time; move them into the accepted window."""
    if isinstance(body, dict) and isinstance(body.get("events"), list):
        for ev in body["events"]:
            if isinstance(ev, dict):
                ev["timestamp"] = now_iso()


def test_the_openapi_operations_never_fail_with_a_server_error(api: RunningApi, kafka: KafkaReader) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    ledger = Ledger()
    ingest = schema["/v1/events"]["POST"]
    positive = ingest.as_strategy(schemathesis.GenerationMode.POSITIVE)
    negative = ingest.as_strategy(schemathesis.GenerationMode.NEGATIVE)

    def call(case: schemathesis.Case) -> None:
        response = case.call(base_url=api.url, headers={"Authorization": f"Bearer {ACME_KEY}"})
        ledger.record(case.body, response)
        case.validate_response(response, checks=CHECKS)

    # Mostly inside the accepted time window: out-of-window events are refused whole (400), and a run
    # whose generated events were all refused once failed the acceptance check below by chance.
    @settings(FUZZ, max_examples=60)
    @given(case=positive, in_window=st.sampled_from([True, True, True, False]))
    def fuzz_valid(case: schemathesis.Case, in_window: bool) -> None:
        if in_window:
            _fresh_timestamps(case.body)
        call(case)

    @settings(FUZZ, max_examples=25)
    @given(case=negative)
    def fuzz_invalid(case: schemathesis.Case) -> None:
        call(case)

    fuzz_valid()
    fuzz_invalid()
    for label in ("/healthz", "/readyz"):
        operation = schema[label]["GET"]

        @settings(FUZZ, max_examples=3)
        @given(case=operation.as_strategy())
        def fuzz_probe(case: schemathesis.Case) -> None:
            response = case.call(base_url=api.url)
            assert response.status_code == 200
            case.validate_response(response, checks=CHECKS)

        fuzz_probe()

    assert 202 in ledger.statuses or 207 in ledger.statuses, "no generated event was ever accepted"
    assert any(400 <= s < 500 for s in ledger.statuses)
    ledger.check_kafka(api, kafka)


def test_mutated_events_never_fail_with_a_server_error(api: RunningApi, kafka: KafkaReader) -> None:
    """Take valid events, replace one value anywhere (or add one) with an arbitrary JSON value."""
    ledger = Ledger()

    @settings(FUZZ, max_examples=150)
    @given(data=st.data(), gzip_it=st.booleans())
    def mutate(data: st.DataObject, gzip_it: bool) -> None:
        events = [trace_event(), feedback_event()]
        paths = value_paths(events)
        path = data.draw(st.sampled_from(paths), label="path")
        if data.draw(st.booleans(), label="add a sibling field"):
            path = (
                [*path[:-1], data.draw(any_text.filter(bool), label="new key")]
                if isinstance(path[-1], str)
                else path
            )
        value = data.draw(json_values, label="value")
        try:
            set_path(events, path, value)
        except (TypeError, KeyError, IndexError):
            return
        content = _dumps_as_a_careless_client(events)
        headers = {"Content-Encoding": "gzip"} if gzip_it else {}
        if gzip_it:
            content = gzip.compress(content)
        response = api.post(content=content, headers=headers)
        ledger.record({"events": events}, response)

    mutate()
    assert 202 in ledger.statuses and 207 in ledger.statuses
    ledger.check_kafka(api, kafka)


def _dumps_as_a_careless_client(events: list[Any]) -> bytes:
    """JSON as Python writes it by default: bare NaN/Infinity tokens, lone surrogates as escapes such as \\ud800."""
    return json.dumps({"events": events}, allow_nan=True).encode()


def test_the_published_request_schema_is_the_contract(api: RunningApi) -> None:
    """The OpenAPI request body of POST /v1/events is `ragmon schema`'s IngestBatch, and only it needs a key."""
    from service.contracts import IngestBatch

    spec = orjson.loads(api.http.get("/openapi.json").content)
    post = spec["paths"]["/v1/events"]["post"]
    body_schema = post["requestBody"]["content"]["application/json"]["schema"]
    exported = IngestBatch.model_json_schema(ref_template="#/components/schemas/{model}")
    exported.pop("$defs")
    assert body_schema == exported
    assert post["security"] == [{"bearer": []}]
    assert set(post["responses"]) >= {"202", "207", "400", "401", "403", "413", "415", "429", "503"}
    assert "Retry-After" in post["responses"]["503"]["headers"]
    for probe in ("/healthz", "/readyz"):
        assert "security" not in spec["paths"][probe]["get"]
    assert "/metrics" not in spec["paths"]  # served on its own port (service/api/metrics.py)
    assert "security" not in spec
