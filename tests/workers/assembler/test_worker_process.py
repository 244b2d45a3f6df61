"""`python -m workers.assembler` as a real process: kill -9 mid-stream loses no trace and emits none twice
(distinct event ids), a restart finishes the job, SIGTERM exits 0 with the offsets committed."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaProducer

from service.contracts.kafka import ensure_topics
from service.contracts.settings import CommonSettings
from service.contracts.spans import encode_span_record, trace_event_id
from tests.conftest import LOG_DIR
from tests.service.api.api_harness import KafkaReader
from tests.support.kafka import committed_total, wait_until
from tests.support.workers import WorkerProcess, wait_ready, worker_env
from tests.workers.assembler.oi_spans import rag_trace, traces_data
from workers.runtime.decode import Undecodable, decode_record

TRACES = 300


@pytest.mark.slow
def test_kill9_then_restart_emits_every_trace_once(
    kafka_bootstrap: str,
    redis_url: str,
    topic_prefix: str,
    redis_client: object,
    tmp_path: Path,
    workers: list[WorkerProcess],
) -> None:
    settings = CommonSettings(
        kafka_bootstrap_servers=kafka_bootstrap, kafka_topic_prefix=topic_prefix, kafka_partitions=4
    )
    ensure_topics(settings)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", linger_ms=5)
    expected = set()
    for _ in range(TRACES):
        spans = rag_trace()
        trace_hex = spans[0].trace_id.hex()
        expected.add(trace_event_id("acme", trace_hex))
        for part in (spans[2:], spans[:2]):  # every trace in two exports, root in the second
            key, value, headers = encode_span_record("acme", trace_hex, traces_data(part))
            producer.send(settings.topics.spans, key=key, value=value, headers=headers)
    producer.flush()
    producer.close()
    config = tmp_path / "ragmon.yaml"
    config.write_text("assembler:\n  quiet_period_s: 0.2\n  claim_lease_s: 2\n  max_traces_per_tick: 20\n")
    env = worker_env(kafka_bootstrap, redis_url, topic_prefix, config, RAGMON_WORKER_MAX_BATCH="50")
    kafka = KafkaReader(kafka_bootstrap)

    first = WorkerProcess("workers.assembler", env, LOG_DIR / f"{topic_prefix}-assembler-1.log")
    workers.append(first)
    wait_until(lambda: len(kafka.records(settings.topics.traces)) >= 40, 60, what="some traces emitted")
    assert first.total("ragmon_worker_events_total", worker="assembler", outcome="processed") > 0
    first.kill9()

    second = WorkerProcess("workers.assembler", env, LOG_DIR / f"{topic_prefix}-assembler-2.log")
    workers.append(second)
    wait_ready(second)

    def emitted_ids() -> set[str]:
        return {dict(r.headers)["ragmon-event-id"].decode() for r in kafka.records(settings.topics.traces)}

    wait_until(lambda: emitted_ids() == expected, 90, what="every trace emitted")
    records = kafka.records(settings.topics.traces)
    events = [decode_record(r, "trace") for r in records]
    assert not [e for e in events if isinstance(e, Undecodable)]
    assert {e.id for e in events if not isinstance(e, Undecodable)} == expected  # replays reuse the same ids
    assert second.terminate() == 0
    committed, end = committed_total(kafka_bootstrap, f"{topic_prefix}-assembler", settings.topics.spans)
    assert committed == end == 2 * TRACES
