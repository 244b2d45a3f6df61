"""A trace the assembler cannot turn into an event is dead-lettered alone; the tick's other traces are emitted.

Before: a deeply nested JSON string in one attribute raised RecursionError out of the tick, every tick that
claimed that trace failed, and another tenant's traces claimed with it stayed unassembled for good.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis
from kafka import KafkaProducer
from prometheus_client import CollectorRegistry

from service.contracts.kafka import ensure_topics
from service.contracts.settings import CommonSettings
from tests.service.api.api_harness import KafkaReader
from tests.workers.assembler.oi_spans import rag_trace
from tests.workers.assembler.test_assembler import Rig
from workers.assembler.__main__ import build_store
from workers.assembler.assembler import Assembler
from workers.assembler.config import AssemblerConfig
from workers.assembler.mapping import TraceSpans, assemble
from workers.assembler.metrics import AssemblerMetrics
from workers.assembler.view import SpanView
from workers.runtime import boundedjson
from workers.runtime.emitter import KafkaEmitter
from workers.runtime.metrics import RuntimeMetrics

RECORD_LIMIT = 256 * 1024  # the broker's per-record size in these tests (RAGMON_WORKER_MAX_RECORD_BYTES)


@pytest.fixture
def rig(kafka_bootstrap: str, redis_client: redis.Redis, topic_prefix: str) -> Iterator[Rig]:
    settings = CommonSettings(
        kafka_bootstrap_servers=kafka_bootstrap, kafka_topic_prefix=topic_prefix, kafka_partitions=2
    )
    ensure_topics(settings)
    config = AssemblerConfig(quiet_period_s=0, root_wait_s=30)
    registry = CollectorRegistry()
    emitter = KafkaEmitter(settings, client_id="test-assembler", max_record_bytes=RECORD_LIMIT)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", max_request_size=4 * 1024 * 1024)
    assembler = Assembler(
        config,
        build_store(redis_client, config),
        emitter,
        settings.topics,
        AssemblerMetrics(registry),
        RuntimeMetrics(registry, "assembler"),
    )
    yield Rig(assembler, registry, settings.topics, KafkaReader(kafka_bootstrap), producer)
    producer.close()
    emitter.close()


DEEP_OBJECT = '{"a":' * 50_000 + "1" + "}" * 50_000
DEEP_ARRAY = "[" * 50_000 + "]" * 50_000


@pytest.mark.parametrize(
    "attrs",
    [
        {"ragmon.retrieval.filters": DEEP_ARRAY},
        {"ragmon.retrieval.filters": DEEP_OBJECT},
        {"ragmon.retrieval.exclusion_sample": DEEP_OBJECT},
        {"metadata": DEEP_OBJECT},
        {"input.value": DEEP_OBJECT, "input.mime_type": "application/json"},
        {
            "ragmon.retrieval.filters": '{"entitlement": '
            + "[" * (boundedjson.MAX_DEPTH + 1)
            + "]" * (boundedjson.MAX_DEPTH + 1)
            + "}"
        },
    ],
    ids=["filters-array", "filters-object", "exclusion", "metadata", "input", "just-past-the-bound"],
)
def test_deeply_nested_json_attributes_are_refused_by_name_never_raised(attrs: dict[str, str]) -> None:
    spans = rag_trace(root_attrs=attrs)
    result = assemble(TraceSpans(spans[0].trace_id.hex(), [SpanView.of(s) for s in spans], {}))
    if (
        result.body is not None
    ):  # a value read as text (metadata keys, the query) is kept as the client's text
        return
    assert result.drop_reason == "invalid_trace", result
    assert result.detail


def test_a_deep_filters_attribute_is_invalid_and_names_the_field() -> None:
    spans = rag_trace(root_attrs={"ragmon.retrieval.filters": DEEP_OBJECT})
    result = assemble(TraceSpans(spans[0].trace_id.hex(), [SpanView.of(s) for s in spans], {}))
    assert result.body is None and result.drop_reason == "invalid_trace"
    assert "filters" in result.detail


def test_a_poison_trace_is_dead_lettered_and_the_tick_emits_the_others(rig: Rig) -> None:
    good = [rag_trace() for _ in range(5)]
    for spans in good:
        rig.send(spans, tenant="victim")
    poison = [rag_trace(root_attrs={"ragmon.retrieval.filters": DEEP_ARRAY}) for _ in range(3)]
    for spans in poison:
        rig.send(spans, tenant="attacker")
    rig.consume_all()
    assert rig.assembler.tick() == 5
    events = rig.trace_events()
    assert sorted(e.tenant for e in events) == ["victim"] * 5
    dead = rig.kafka.records(rig.topics.dlq)
    assert len(dead) == 3
    for record in dead:
        headers = dict(record.headers)
        assert headers["ragmon-dlq-reason"] == b"invalid_body"
        assert b"filters" in headers["ragmon-dlq-detail"]
        assert headers["ragmon-tenant"] == b"attacker"
        assert record.key.startswith(b"attacker/")
    assert rig.metric("ragmon_assembler_traces_dropped_total", reason="invalid_trace") == 3
    assert rig.metric("ragmon_worker_dead_letters_total", worker="assembler", reason="invalid_body") == 3
    assert rig.assembler.store.pending() == 0, "nothing left to claim again"


def test_a_trace_whose_event_cannot_fit_the_broker_is_dead_lettered(rig: Rig) -> None:
    big = rag_trace()
    retriever = big[2]
    del retriever.attributes[:]
    for i in range(12):  # 12 documents of 30,000 characters: a valid body, a 360 kB event
        retriever.attributes.add(key=f"retrieval.documents.{i}.document.content").value.string_value = (
            "x" * 30_000
        )
        retriever.attributes.add(key=f"retrieval.documents.{i}.document.id").value.string_value = f"d{i}"
    retriever.attributes.add(key="openinference.span.kind").value.string_value = "RETRIEVER"
    rig.send(big, tenant="attacker")
    rig.send(rag_trace(), tenant="victim")
    rig.consume_all()
    assert rig.assembler.tick() == 1
    assert [e.tenant for e in rig.trace_events()] == ["victim"]
    [dead] = rig.kafka.records(rig.topics.dlq)
    headers = dict(dead.headers)
    assert headers["ragmon-dlq-reason"] == b"derived_record_too_large"
    assert int(headers["ragmon-dlq-truncated"]) > len(dead.value), "the dead letter was cut to fit"
    assert (
        rig.metric("ragmon_worker_dead_letters_total", worker="assembler", reason="derived_record_too_large")
        == 1
    )
    assert rig.assembler.store.pending() == 0
    json.dumps(headers["ragmon-dlq-detail"].decode())  # a readable detail
