"""The assembler against the session's real broker and Redis: grouping across exports, one event per trace,
idempotent replays, late and overflowing spans, rootless traces, feedback, dead letters."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from kafka import KafkaProducer
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from prometheus_client import CollectorRegistry

from service.contracts import TraceBody
from service.contracts.kafka import ensure_topics
from service.contracts.settings import CommonSettings
from service.contracts.spans import encode_span_record, trace_event_id
from service.contracts.topics import Topics
from tests.service.api.api_harness import KafkaReader
from tests.workers.assembler.oi_spans import oi_span, rag_trace, store_records, traces_data
from tests.workers.assembler.test_genai import chat_attrs, genai_span, genai_trace
from workers.assembler.__main__ import build_store
from workers.assembler.assembler import Assembler
from workers.assembler.config import AssemblerConfig
from workers.assembler.metrics import AssemblerMetrics
from workers.assembler.processor import AssemblerProcessor
from workers.runtime.consumer import ConsumerRuntime
from workers.runtime.contract import Processor
from workers.runtime.decode import Undecodable, decode_record
from workers.runtime.emitter import KafkaEmitter
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.settings import WorkerSettings


@dataclass
class Rig:
    assembler: Assembler
    registry: CollectorRegistry
    topics: Topics
    kafka: KafkaReader
    producer: KafkaProducer

    def send(self, spans: list[Span], tenant: str = "acme") -> None:
        key, value, headers = encode_span_record(tenant, spans[0].trace_id.hex(), traces_data(spans))
        self.producer.send(self.topics.spans, key=key, value=value, headers=headers)
        self.producer.flush()

    def consume_all(self) -> int:
        """Hand every record of the spans topic to the assembler (as a fresh consumer group would)."""
        return store_records(self.assembler, self.kafka.records(self.topics.spans))

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def trace_events(self) -> list[Any]:
        return [decode_record(r, "trace") for r in self.kafka.records(self.topics.traces)]


@pytest.fixture
def rig(kafka_bootstrap: str, redis_client: redis.Redis, topic_prefix: str) -> Iterator[Rig]:
    settings = CommonSettings(
        kafka_bootstrap_servers=kafka_bootstrap, kafka_topic_prefix=topic_prefix, kafka_partitions=2
    )
    ensure_topics(settings)
    config = AssemblerConfig(quiet_period_s=0, root_wait_s=30, max_spans_per_trace=20)
    registry = CollectorRegistry()
    emitter = KafkaEmitter(settings, client_id="test-assembler")
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    assembler = Assembler(
        config, build_store(redis_client, config), emitter, settings.topics, AssemblerMetrics(registry)
    )
    yield Rig(assembler, registry, settings.topics, KafkaReader(kafka_bootstrap), producer)
    producer.close()
    emitter.close()


def test_spans_of_several_exports_become_one_valid_trace_event(rig: Rig) -> None:
    spans = rag_trace()
    rig.send(spans[2:])  # children first, in one export
    rig.consume_all()
    assert rig.assembler.tick() == 0  # no root yet
    rig.send(spans[:2])  # the root and the embedding later
    rig.consume_all()
    assert rig.assembler.tick() == 1
    [event] = rig.trace_events()
    assert not isinstance(event, Undecodable), event
    trace_hex = spans[0].trace_id.hex()
    assert event.id == trace_event_id("acme", trace_hex) and event.tenant == "acme"
    assert isinstance(event.body, TraceBody) and event.body.trace_id == trace_hex
    assert len(event.body.retrieval.documents) == 2 and event.body.usage.tokens["prompt"] == 420
    assert rig.metric("ragmon_assembler_spans_total", outcome="stored") == 4
    assert rig.metric("ragmon_assembler_traces_emitted_total", tenant="acme") == 1


def test_a_tenant_flooding_traces_does_not_hold_back_another_tenants(rig: Rig) -> None:
    for _ in range(30):
        rig.send(rag_trace(), tenant="flood")
    rig.consume_all()
    time.sleep(0.01)  # the quiet tenant's trace opens after every one of the flood's
    quiet = rag_trace()
    rig.send(quiet, tenant="quiet")
    rig.consume_all()
    small = rig.assembler.config.model_copy(update={"max_traces_per_tick": 10})
    a = rig.assembler
    assert Assembler(small, a.store, a.emitter, rig.topics, a.m).tick() == 10
    assert rig.metric("ragmon_assembler_traces_emitted_total", tenant="quiet") == 1  # in the first tick
    assert rig.metric("ragmon_assembler_traces_emitted_total", tenant="flood") == 9
    assert quiet[0].trace_id.hex() in {e.body.trace_id for e in rig.trace_events()}
    assert a.tick() == 21 and a.store.pending() == 0


def test_replay_and_late_spans_are_counted_never_emitted_twice(rig: Rig) -> None:
    spans = rag_trace()
    rig.send(spans)
    rig.consume_all()
    rig.consume_all()  # a redelivery before assembly: duplicates
    assert rig.metric("ragmon_assembler_spans_total", outcome="duplicate") == 4
    assert rig.assembler.tick() == 1
    rig.send([oi_span(spans[0].trace_id, "TOOL", "late", time.time_ns(), 1, spans[0].span_id)])
    rig.consume_all()  # the whole topic again, after emission: every span is late now
    assert rig.assembler.tick() == 0
    assert rig.metric("ragmon_assembler_spans_total", outcome="late") == 5
    assert len(rig.trace_events()) == 1


def test_a_huge_trace_is_bounded_and_still_emitted(rig: Rig) -> None:
    spans = rag_trace()
    root = spans[0]
    extra = [
        oi_span(root.trace_id, "TOOL", f"t{i}", root.start_time_unix_nano, 1, root.span_id)
        for i in range(100)
    ]
    rig.send(extra)
    rig.send(spans)  # the root arrives after the cap is reached: still kept
    rig.consume_all()
    assert rig.assembler.tick() == 1
    # 20 other spans, the root, and the three spans the mapping reads (their own cap of 20)
    assert rig.metric("ragmon_assembler_spans_total", outcome="stored") == 24
    assert rig.metric("ragmon_assembler_spans_total", outcome="overflow") == 80
    [event] = rig.trace_events()
    assert event.body.usage.model == "gpt-4o-mini"


def test_drops_are_counted_by_reason(rig: Rig) -> None:
    tid = os.urandom(16)
    rig.send([oi_span(tid, None, "GET /health", time.time_ns(), 1)])
    orphan = os.urandom(16)
    rig.send([oi_span(orphan, "LLM", "llm", time.time_ns(), 1, os.urandom(8))])
    rig.consume_all()
    assert rig.assembler.tick() == 0
    assert rig.metric("ragmon_assembler_traces_dropped_total", reason="not_openinference") == 1
    assert rig.metric("ragmon_assembler_trace_spans_total", kind="none") == 1
    assert rig.assembler.tick(time.time() + 31) == 0  # past root_wait_s
    assert rig.metric("ragmon_assembler_traces_dropped_total", reason="no_root") == 1
    assert rig.trace_events() == []


def test_annotation_span_becomes_a_feedback_event(rig: Rig) -> None:
    target = rag_trace()
    note = oi_span(
        os.urandom(16),
        None,
        "feedback",
        time.time_ns(),
        1,
        attrs={"annotations.0.annotation.name": "thumbs", "annotations.0.annotation.score": 1},
    )
    note.links.add(trace_id=target[0].trace_id, span_id=target[0].span_id)
    rig.send([note])
    rig.consume_all()
    [record] = rig.kafka.records(rig.topics.feedback)
    event = decode_record(record, "feedback")
    assert not isinstance(event, Undecodable), event
    assert event.body.trace_id == target[0].trace_id.hex() and event.body.value is True
    assert rig.assembler.tick() == 0 and rig.assembler.store.pending() == 0  # the carrier is not a trace


def _runtime(
    kafka_bootstrap: str, redis_client: redis.Redis, topic_prefix: str, **overrides: Any
) -> tuple[ConsumerRuntime, CollectorRegistry, KafkaEmitter, WorkerSettings]:
    """The assembler on the shared runtime, as `python -m workers.assembler` runs it."""
    settings = WorkerSettings(
        kafka_bootstrap_servers=kafka_bootstrap,
        kafka_topic_prefix=topic_prefix,
        kafka_partitions=1,
        worker_poll_timeout_ms=100,
        **overrides,
    )
    ensure_topics(settings)
    config = AssemblerConfig(quiet_period_s=0)
    registry = CollectorRegistry()
    metrics = RuntimeMetrics(registry, "assembler")
    emitter = KafkaEmitter(settings, client_id="test-assembler")
    assembler = Assembler(
        config,
        build_store(redis_client, config),
        emitter,
        settings.topics,
        AssemblerMetrics(registry),
        metrics,
    )
    processor = AssemblerProcessor(assembler, settings.topics.spans)
    assert isinstance(processor, Processor)
    return ConsumerRuntime(processor, settings, metrics, emitter, redis_client), registry, emitter, settings


def test_the_runtime_dead_letters_a_bad_record_alone_and_assembles_the_rest(
    kafka_bootstrap: str, redis_client: redis.Redis, topic_prefix: str
) -> None:
    runtime, registry, emitter, settings = _runtime(kafka_bootstrap, redis_client, topic_prefix)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    spans = rag_trace()
    key, value, headers = encode_span_record("acme", spans[0].trace_id.hex(), traces_data(spans))
    producer.send(settings.topics.spans, key=key, value=value, headers=headers)
    producer.send(
        settings.topics.spans,
        key=b"acme/x",
        value=b"\x0a\xff\xff",
        headers=[("ragmon-event-type", b"otlp_spans"), ("ragmon-schema", b"1"), ("ragmon-tenant", b"acme")],
    )
    producer.flush()
    producer.close()
    kafka = KafkaReader(kafka_bootstrap)
    try:
        deadline = time.monotonic() + 30
        while not kafka.records(settings.topics.traces) and time.monotonic() < deadline:
            runtime._step()
        [dead] = kafka.records(settings.topics.dlq)
        headers_of = dict(dead.headers)
        assert headers_of["ragmon-dlq-reason"] == b"invalid_spans" and dead.key == b"acme/x"
        assert headers_of["ragmon-dlq-worker"] == b"assembler"
        [event] = [decode_record(r, "trace") for r in kafka.records(settings.topics.traces)]
        assert not isinstance(event, Undecodable) and event.id == trace_event_id(
            "acme", spans[0].trace_id.hex()
        )
        labels = {"worker": "assembler", "reason": "invalid_spans"}
        assert registry.get_sample_value("ragmon_worker_dead_letters_total", labels) == 1
        processed = {"worker": "assembler", "type": "otlp_spans", "outcome": "processed"}
        assert registry.get_sample_value("ragmon_worker_events_total", processed) == 1
    finally:
        runtime.consumer.close()
        emitter.close()


def test_the_runtime_halts_the_assembler_on_a_dead_letter_flood_without_dead_lettering_it(
    kafka_bootstrap: str, redis_client: redis.Redis, topic_prefix: str
) -> None:
    runtime, registry, emitter, settings = _runtime(
        kafka_bootstrap, redis_client, topic_prefix, worker_dlq_min_messages=10
    )
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for _ in range(20):
        producer.send(settings.topics.spans, value=b"not a span record")
    producer.flush()
    producer.close()
    try:
        deadline = time.monotonic() + 30
        while runtime.halted is None and time.monotonic() < deadline:
            runtime._step()
        assert runtime.halted == "dead_letter_ratio"
        assert runtime.readiness().reason == "halted: dead_letter_ratio" and not runtime.readiness().ready
        assert (
            registry.get_sample_value(
                "ragmon_worker_halted", {"worker": "assembler", "reason": "dead_letter_ratio"}
            )
            == 1
        )
        runtime._step()  # halted: fetches nothing, dead-letters nothing
        assert KafkaReader(kafka_bootstrap).records(settings.topics.dlq) == []
    finally:
        runtime.consumer.close()
        emitter.close()


def test_a_genai_trace_is_bounded_by_its_operations_and_counts_unknown_attributes(rig: Rig) -> None:
    """GenAI spans are classed at store time by gen_ai.operation.name, as OpenInference ones by their kind."""
    spans = genai_trace(chat_attrs(**{"gen_ai.brand_new.thing": "x"}))
    root = spans[0]
    tools = [
        genai_span(
            root.trace_id, f"t{i}", root.start_time_unix_nano, 1, root.span_id, {"gen_ai.operation.name": "x"}
        )
        for i in range(100)
    ]
    rig.send(tools)
    rig.send(spans)
    rig.consume_all()
    assert rig.assembler.tick() == 1
    # 20 other spans (unknown operations), the root, and the three GenAI spans the mapping reads
    assert rig.metric("ragmon_assembler_spans_total", outcome="stored") == 24
    [event] = rig.trace_events()
    assert event.body.usage.model == "gpt-4o-mini-2024-07-18" and len(event.body.retrieval.documents) == 2
    assert rig.metric("ragmon_assembler_unknown_attributes_total", convention="gen_ai") == 1
    assert rig.metric("ragmon_assembler_trace_spans_total", kind="llm") == 1
    assert rig.metric("ragmon_assembler_trace_spans_total", kind="unknown") == 20
