"""PII redaction at ingestion: what reaches Kafka is redacted, counted per kind, ordinary text untouched."""

from __future__ import annotations

from collections.abc import Callable

import orjson
from prometheus_client.parser import text_string_to_metric_families

from service.api.redaction import REPLACEMENT
from tests.service.api.api_events import label_event, release_event, trace_event
from tests.service.api.api_harness import KafkaReader, RunningApi

EMAIL, PHONE, CARD, IP = (REPLACEMENT[k] for k in ("email", "phone", "card", "ip"))

ORDINARY = (
    "In 2023 the Pro plan cost $1,299.99 (v2.14.3 pricing); order #58213 and ticket INC-20240611 "
    "were closed on 2024-06-11 14:05. Reference 1234567812345678 is not a card."
)


def pii_trace() -> dict:
    return trace_event(
        query={"text": "I am jane.doe@example.com, call me on +1 (415) 555-0132 about my invoice"},
        retrieval={
            "documents": [
                {"id": "crm-7", "text": "Card on file 4111 1111 1111 1111; last login from 192.168.10.24."},
                {"id": "kb-1", "text": ORDINARY},
                {"id": "log-3", "text": "Session opened from 2001:db8::8a2e:370:7334."},
            ]
        },
        answer={
            "text": "We wrote to jane.doe@example.com; card 5500-0000-0000-0004 is updated.",
            "citations": ["crm-7"],
        },
    )


def scraped_redactions(api: RunningApi) -> dict[str, float]:
    families = text_string_to_metric_families(api.scrape())
    return {
        s.labels["kind"]: s.value
        for f in families
        if f.name == "ragmon_api_redactions"
        for s in f.samples
        if s.name == "ragmon_api_redactions_total"
    }


def test_pii_is_redacted_before_it_reaches_kafka_and_counted_per_kind(
    api: RunningApi, kafka: KafkaReader
) -> None:
    trace = pii_trace()
    label = label_event(note="escalated by qa.lead@acme.io")
    release = release_event(description="rolled back after 10.0.0.7 flapped")
    r = api.post([trace, label, release])
    assert r.status_code == 202, r.text

    [stored] = kafka.values(api.topics.traces)
    body = stored["body"]
    assert body["query"]["text"] == f"I am {EMAIL}, call me on {PHONE} about my invoice"
    docs = body["retrieval"]["documents"]
    assert docs[0]["text"] == f"Card on file {CARD}; last login from {IP}."
    assert docs[1]["text"] == ORDINARY
    assert docs[2]["text"] == f"Session opened from {IP}."
    assert body["answer"]["text"] == f"We wrote to {EMAIL}; card {CARD} is updated."
    [stored_label] = kafka.values(api.topics.labels)
    assert stored_label["body"]["note"] == f"escalated by {EMAIL}"
    [stored_release] = kafka.values(api.topics.releases)
    assert stored_release["body"]["description"] == f"rolled back after {IP} flapped"

    raw = b"".join(r.value for r in kafka.event_records(api.topics))
    for secret in (
        b"jane.doe@example.com",
        b"555-0132",
        b"4111 1111",
        b"5500-0000",
        b"192.168.10.24",
        b"2001:db8::",
        b"qa.lead@acme.io",
        b"10.0.0.7",
    ):
        assert secret not in raw
    expected = {"email": 3.0, "phone": 1.0, "card": 2.0, "ip": 3.0}
    assert scraped_redactions(api) == expected
    assert {k: api.metric("ragmon_api_redactions_total", {"kind": k}) for k in expected} == expected


def test_ordinary_text_reaches_kafka_byte_for_byte(api: RunningApi, kafka: KafkaReader) -> None:
    trace = trace_event(
        query={"text": ORDINARY},
        answer={"text": ORDINARY},
        retrieval={"documents": [{"id": "kb-1", "text": ORDINARY}]},
    )
    assert api.post([trace]).status_code == 202
    [stored] = kafka.values(api.topics.traces)
    assert stored["body"] == trace["body"]
    assert scraped_redactions(api) == {}


def test_redaction_follows_its_configuration(
    start_api: Callable[..., RunningApi], kafka: KafkaReader
) -> None:
    api = start_api(redaction={"enabled": True, "kinds": ["email"]})
    trace = pii_trace()
    assert api.post([trace]).status_code == 202
    [stored] = kafka.values(api.topics.traces)
    assert stored["body"]["query"]["text"] == f"I am {EMAIL}, call me on +1 (415) 555-0132 about my invoice"
    assert (
        stored["body"]["retrieval"]["documents"][0]["text"]
        == trace["body"]["retrieval"]["documents"][0]["text"]
    )
    assert scraped_redactions(api) == {"email": 2.0}


def test_redaction_can_be_turned_off(start_api: Callable[..., RunningApi], kafka: KafkaReader) -> None:
    api = start_api(redaction={"enabled": False})
    trace = pii_trace()
    assert api.post([trace]).status_code == 202
    [record] = kafka.records(api.topics.traces)
    assert orjson.loads(record.value)["body"] == trace["body"]
    assert scraped_redactions(api) == {}
