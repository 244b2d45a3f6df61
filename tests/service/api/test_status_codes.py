"""Every status of POST /v1/events (docs/conventions.md, "Errors"), each checked against Kafka.

The response body says what happened; the topics say whether it is true: a 2xx
only for events the broker acknowledged, nothing at all from a refused request.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Iterator
from datetime import datetime

import orjson
import pytest
import redis

from service.local.embedded import free_port
from tests.service.api.api_events import (
    ACME_KEY,
    GLOBEX_KEY,
    READONLY_KEY,
    event,
    feedback_event,
    headers_of,
    label_event,
    release_event,
    trace_event,
)
from tests.service.api.api_harness import DEFAULT_KEYS, KafkaReader, RunningApi, key_entry

TRACEPARENT = re.compile(rb"^00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


def by_id(values: list[dict]) -> dict[str, dict]:
    return {v["id"]: v for v in values}


def test_202_only_after_every_event_is_in_kafka(api: RunningApi, kafka: KafkaReader) -> None:
    trace, feedback, release, label = trace_event(), feedback_event(), release_event(), label_event()
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    r = api.post([trace, feedback, release, label], headers={"traceparent": incoming})

    assert r.status_code == 202, r.text
    assert r.json() == {"accepted": 4}
    expected = {
        api.topics.traces: (trace, f"acme/{trace['body']['request_id']}"),
        api.topics.feedback: (feedback, f"acme/{feedback['body']['trace_id']}"),
        api.topics.releases: (release, "acme/production"),
        api.topics.labels: (label, f"acme/{label['body']['trace_id']}"),
    }
    for topic, (sent, key) in expected.items():
        [record] = kafka.records(topic)
        value = orjson.loads(record.value)
        assert record.key == key.encode()
        assert {k: value[k] for k in ("schema_version", "id", "type", "tenant")} == {
            "schema_version": 1,
            "id": sent["id"],
            "type": sent["type"],
            "tenant": "acme",
        }
        assert value["body"] == sent["body"]
        received = datetime.fromisoformat(value["received_at"])
        assert abs((received - datetime.fromisoformat(value["timestamp"])).total_seconds()) < 30
        headers = headers_of(record)
        assert headers["ragmon-event-id"] == sent["id"].encode()
        assert headers["ragmon-event-type"] == sent["type"].encode()
        assert headers["ragmon-tenant"] == b"acme"
        assert headers["ragmon-schema"] == b"1"
        # The caller's W3C trace continues through the API into the record, for the workers.
        match = TRACEPARENT.match(headers["traceparent"])
        assert match is not None and match.group(1) == b"0af7651916cd43dd8448eb211c80319c"
    assert kafka.records(api.topics.dlq) == []


def test_202_puts_a_request_and_its_shadow_on_one_partition(api: RunningApi, kafka: KafkaReader) -> None:
    pairs = []
    for n in range(6):
        production = trace_event(request_id=f"req-shared-{n}")
        shadow = trace_event(request_id=f"req-shared-{n}", variant="cand-rerank-v2")
        pairs.append((production["id"], shadow["id"]))
        assert api.post([production, shadow]).status_code == 202
    partition = {orjson.loads(r.value)["id"]: r.partition for r in kafka.records(api.topics.traces)}
    assert len(partition) == 12
    assert all(partition[a] == partition[b] for a, b in pairs)


def test_207_answers_one_result_per_event_and_produces_only_the_valid_ones(
    api: RunningApi, kafka: KafkaReader
) -> None:
    good_trace, good_feedback = trace_event(), feedback_event()
    zero_rate = trace_event(sample_rate=0)
    repeated = dict(good_trace)
    r = api.post([good_trace, zero_rate, good_feedback, repeated])

    assert r.status_code == 207, r.text
    body = r.json()
    assert (body["accepted"], body["rejected"]) == (2, 2)
    assert [(x["index"], x["id"], x["status"]) for x in body["results"]] == [
        (0, good_trace["id"], "accepted"),
        (1, zero_rate["id"], "rejected"),
        (2, good_feedback["id"], "accepted"),
        (3, good_trace["id"], "rejected"),
    ]
    assert body["results"][0]["error"] is None
    assert (
        body["results"][1]["error"]
        == "events[1].body.sample_rate: Input should be greater than 0 (greater_than)"
    )
    assert body["results"][3]["error"] == "events[3].id: duplicates events[0].id in this batch (unique_id)"
    assert [v["id"] for v in kafka.values(api.topics.traces)] == [good_trace["id"]]
    assert [v["id"] for v in kafka.values(api.topics.feedback)] == [good_feedback["id"]]
    assert kafka.records(api.topics.dlq) == []


def test_400_when_the_envelope_is_malformed(api: RunningApi, kafka: KafkaReader) -> None:
    r = api.post(content=b'{"events": [{"type": "trace",')
    assert r.status_code == 400
    assert r.json()["field"] == "body" and r.json()["rule"] == "json"
    assert r.json()["error"].startswith("body is not valid JSON")
    r = api.post(body={"events": {"type": "trace"}})
    assert r.status_code == 400
    assert r.json() == {"error": "'events' must be a list of events", "field": "events", "rule": "list"}
    assert kafka.event_records(api.topics) == []


def test_400_when_no_event_is_valid(api: RunningApi, kafka: KafkaReader) -> None:
    events = [trace_event(sample_rate=1.5), feedback_event(kind="shrug")]
    r = api.post(events)
    assert r.status_code == 400
    body = r.json()
    assert (body["accepted"], body["rejected"]) == (0, 2)
    assert body["error"] == "no event in the batch is valid; see results"
    assert [x["status"] for x in body["results"]] == ["rejected", "rejected"]
    assert (
        body["results"][0]["error"]
        == "events[0].body.sample_rate: Input should be less than or equal to 1 (less_than_equal)"
    )
    assert body["results"][1]["error"].startswith("events[1].body.kind: Input should be 'thumbs'")
    assert kafka.event_records(api.topics) == []


@pytest.mark.parametrize(
    ("key", "scheme", "message"),
    [
        (None, None, "Authorization header missing: send 'Authorization: Bearer <api key>'"),
        ("rgm_not_a_key", "Bearer", "API key not recognised"),
        (ACME_KEY, "Basic", "Authorization header must be 'Bearer <api key>'"),
    ],
    ids=["missing", "unknown", "not-bearer"],
)
def test_401_without_a_known_key(
    api: RunningApi, kafka: KafkaReader, key: str | None, scheme: str | None, message: str
) -> None:
    headers = {"Authorization": f"{scheme} {key}"} if key else {}
    r = api.post([trace_event()], key=None, headers=headers)
    assert r.status_code == 401
    assert r.json() == {"error": message, "rule": "api_key"}
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert kafka.event_records(api.topics) == []


def test_403_for_a_key_without_the_ingest_scope(api: RunningApi, kafka: KafkaReader) -> None:
    r = api.post([trace_event()], key=READONLY_KEY)
    assert r.status_code == 403
    assert r.json() == {"error": "API key of tenant 'acme' lacks the 'ingest' scope", "rule": "api_key"}
    assert kafka.event_records(api.topics) == []


def test_403_for_a_body_that_names_another_tenant(api: RunningApi, kafka: KafkaReader) -> None:
    honest, impostor = trace_event(), trace_event(tenant="globex")
    r = api.post([honest, impostor])
    assert r.status_code == 403
    assert r.json()["field"] == "events[1].body.tenant"
    assert r.json()["rule"] == "tenant_from_key"
    assert "names tenant 'globex' but the API key belongs to 'acme'" in r.json()["error"]
    # The whole request is refused: not even the honest event is produced.
    assert kafka.event_records(api.topics) == []


def test_413_for_a_body_over_the_cap(api: RunningApi, kafka: KafkaReader) -> None:
    cap = api.settings.max_body_bytes
    big = [trace_event(query={"text": "x" * 16_000}) for _ in range(cap // 16_000 + 1)]
    r = api.post(big)
    assert r.status_code == 413
    assert r.json() == {
        "error": f"body of {len(orjson.dumps({'events': big}))} bytes exceeds {cap} bytes",
        "field": "body",
        "rule": "max_body_bytes",
    }

    def chunks() -> Iterator[bytes]:  # no Content-Length: the cap applies while reading
        yield b'{"events": ['
        for _ in range(cap // 1024 + 1):
            yield b" " * 1024
        yield b"]}"

    r = api.http.post(
        "/v1/events",
        content=chunks(),
        headers={"Authorization": f"Bearer {ACME_KEY}", "Content-Type": "application/json"},
    )
    assert r.status_code == 413
    assert r.json() == {"error": f"body exceeds {cap} bytes", "field": "body", "rule": "max_body_bytes"}
    assert kafka.event_records(api.topics) == []


def test_413_for_a_gzip_bomb(api: RunningApi, kafka: KafkaReader) -> None:
    cap = api.settings.max_decompressed_bytes
    padded = trace_event(query={"text": "ok"})
    bomb = orjson.dumps({"events": [padded]})[:-1] + b" " * (8 * cap) + b"}"
    compressed = gzip.compress(bomb)
    assert len(compressed) < api.settings.max_body_bytes // 8  # small on the wire, huge inflated
    r = api.post(content=compressed, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 413
    assert r.json() == {
        "error": f"decompressed body exceeds {cap} bytes",
        "field": "body",
        "rule": "max_decompressed_bytes",
    }
    assert kafka.event_records(api.topics) == []


def test_a_gzip_body_under_the_cap_is_accepted(api: RunningApi, kafka: KafkaReader) -> None:
    ev = trace_event()
    r = api.post(content=gzip.compress(orjson.dumps({"events": [ev]})), headers={"Content-Encoding": "gzip"})
    assert r.status_code == 202 and r.json() == {"accepted": 1}
    assert [v["id"] for v in kafka.values(api.topics.traces)] == [ev["id"]]


def test_413_for_too_many_events(api: RunningApi, kafka: KafkaReader) -> None:
    limit = api.settings.max_events_per_batch
    r = api.post([feedback_event() for _ in range(limit + 1)])
    assert r.status_code == 413
    assert r.json() == {
        "error": f"{limit + 1} events in one batch; at most {limit}",
        "field": "events",
        "rule": "max_length",
    }
    assert kafka.event_records(api.topics) == []


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            {"Content-Type": "text/plain"},
            {
                "error": "Content-Type must be application/json, got 'text/plain'",
                "field": "Content-Type",
                "rule": "application/json",
            },
        ),
        (
            {"Content-Type": ""},
            {
                "error": "Content-Type must be application/json, got 'none'",
                "field": "Content-Type",
                "rule": "application/json",
            },
        ),
        (
            {"Content-Encoding": "br"},
            {
                "error": "Content-Encoding 'br' is not supported; send gzip or no encoding",
                "field": "Content-Encoding",
                "rule": "gzip_or_identity",
            },
        ),
    ],
    ids=["text-plain", "no-content-type", "brotli"],
)
def test_415_for_a_wrong_content_type_or_encoding(
    api: RunningApi, kafka: KafkaReader, headers: dict[str, str], expected: dict[str, str]
) -> None:
    r = api.post([trace_event()], headers=headers)
    assert r.status_code == 415
    assert r.json() == expected
    assert kafka.event_records(api.topics) == []


def test_429_with_retry_after_over_the_tenant_rate(
    start_api: Callable[..., RunningApi], kafka: KafkaReader, redis_client: redis.Redis
) -> None:
    throttled_key = "rgm_test_throttled_0123456789"
    api = start_api(
        api_keys=[*DEFAULT_KEYS, key_entry("throttled", throttled_key, rate_limit_eps=0.5, burst=5)],
        max_events_per_batch=5,
    )
    first = [feedback_event() for _ in range(5)]
    second = [feedback_event() for _ in range(5)]
    assert api.post(first, key=throttled_key).status_code == 202
    r = api.post(second, key=throttled_key)

    assert r.status_code == 429
    assert r.headers["Retry-After"] == "10"  # 5 events at 0.5/s from an empty bucket
    assert r.json() == {
        "error": "tenant 'throttled' is over its rate of 0.5 events/s (burst 5); retry after 10s",
        "rule": "rate_limit",
    }
    produced = [v["id"] for v in kafka.values(api.topics.feedback)]
    assert sorted(produced) == sorted(e["id"] for e in first)
    assert api.metric("ragmon_api_rate_limited_total", {"tenant": "throttled"}) == 1


def test_503_with_retry_after_when_no_broker_acknowledges(
    start_api: Callable[..., RunningApi], kafka: KafkaReader, kafka_bootstrap: str
) -> None:
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens there
    api = start_api(kafka_bootstrap_servers=nowhere, retry_after_s=3)
    r = api.post([trace_event()])

    assert r.status_code == 503
    assert r.headers["Retry-After"] == "3"
    body = r.json()
    assert body["rule"] == "broker_ack" and "accepted" not in body
    assert body["error"].startswith(
        f"broker unavailable (broker not reachable at {nowhere}); nothing was accepted"
    )
    ready = api.http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json() == {
        "ready": False,
        "checks": {"broker": f"down: broker not reachable at {nowhere}", "redis": "ok"},
    }
    assert api.metric("ragmon_api_shed_total", {"reason": "broker_down"}) == 1
    assert api.metric("ragmon_api_events_accepted_total", {"tenant": "acme", "type": "trace"}) == 0
    # The API never reached a broker, so it created no topic there: nothing of its prefix exists.
    assert kafka.event_records(api.topics) == []


def test_an_event_type_goes_to_its_own_topic_only(api: RunningApi, kafka: KafkaReader) -> None:
    ev = event("release", {"release": "2026.02.0"})
    assert api.post([ev], key=GLOBEX_KEY).status_code == 202
    assert [v["tenant"] for v in kafka.values(api.topics.releases)] == ["globex"]
    for name in ("traces", "feedback", "labels", "dlq", "scores"):
        assert kafka.records(getattr(api.topics, name)) == []
