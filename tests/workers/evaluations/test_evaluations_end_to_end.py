"""The evaluation exporter as a worker process: Kafka -> a real OTLP/HTTP logs endpoint, through an outage.

Real broker, real Redis, the worker run by the shared runtime (`python -m workers.evaluations`): while
the endpoint answers 503 the worker is not ready and commits nothing; once it answers 200 every
evaluation arrives exactly once (the answer checks of a trace included), the implicit signal never,
and the offsets are committed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer

from service.contracts import Topics
from service.contracts.scores import score_record
from service.contracts.spans import encode_span_record
from tests.conftest import LOG_DIR
from tests.support.kafka import RecordWriter, committed_total, stored
from tests.support.workers import WorkerProcess, wait_ready, worker_env
from tests.workers.evaluations.collector import Collector, attributes
from tests.workers.evaluations.test_evaluations_processor import TRACE
from tests.workers.phoenix.phoenix_data import faithfulness_score, rag_trace, reformulation, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


@pytest.fixture
def worker(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, collector: Collector
) -> Iterator[WorkerProcess]:
    env = worker_env(
        kafka_bootstrap,
        redis_url,
        topic_prefix,
        RAGMON_WORKER_RETRY_MAX_S="1",
        RAGMON_EVALUATIONS_ENDPOINT=collector.endpoint,
        RAGMON_EVALUATIONS_HEADERS="Authorization=Bearer%20k",
        RAGMON_EVALUATIONS_TIMEOUT_S="3",
    )
    w = WorkerProcess("workers.evaluations", env, LOG_DIR / f"evaluations-{topic_prefix}.log")
    try:
        wait_ready(w, 60)
        yield w
    finally:
        w.stop()


def test_evaluations_reach_the_endpoint_once_across_an_outage(
    worker: WorkerProcess, collector: Collector, kafka_bootstrap: str, topic_prefix: str
) -> None:
    topics = Topics(topic_prefix)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    labels = RecordWriter(kafka_bootstrap, topics)
    try:
        collector.down = True
        otlp = rag_trace(["d1"])  # an OTLP trace: its spans name the root span
        key, value, headers = encode_span_record("acme", otlp.trace_id, otlp.data)
        producer.send(topics.spans, key=key, value=value, headers=headers)
        score = faithfulness_score(TRACE, score=0.9, mode="answer")
        for event in (
            reformulation(TRACE),
            score,
            faithfulness_score(otlp.trace_id, score=0.1, mode="answer"),
        ):
            key, value, headers = score_record(event)
            producer.send(topics.scores, key=key, value=value, headers=headers)
        producer.flush(timeout=10)
        labels.send_event(stored("label", {"trace_id": TRACE, "faithful": True}, event_id=str(uuid.uuid4())))
        checked = {  # the answer cites a document it was not given: citations_known fails
            "trace_id": TRACE,
            "request_id": "req-1",
            "query": {"text": "what are the fees?"},
            "retrieval": {"documents": [{"id": "d1", "text": "Fees are listed on the pricing page."}]},
            "answer": {"text": "See the pricing page.", "citations": ["d-unknown"]},
        }
        labels.send_event(stored("trace", checked, event_id=str(uuid.uuid4())))
        labels.flush()

        wait_for(lambda: worker.total("ragmon_worker_retries_total") >= 2, timeout_s=30)
        assert not worker.ready()
        assert committed_total(kafka_bootstrap, f"{topic_prefix}-evaluations", topics.scores)[0] == 0
        assert collector.records() == []

        collector.down = False
        wait_for(lambda: len(collector.records()) >= 5, 30)
        wait_for(
            lambda: committed_total(kafka_bootstrap, f"{topic_prefix}-evaluations", topics.scores) == (3, 3),
            timeout_s=15,
        )
        wait_for(
            lambda: committed_total(kafka_bootstrap, f"{topic_prefix}-evaluations", topics.labels) == (1, 1),
            timeout_s=15,
        )
        wait_for(
            lambda: committed_total(kafka_bootstrap, f"{topic_prefix}-evaluations", topics.traces) == (1, 1),
            timeout_s=15,
        )
        wait_for(worker.ready, timeout_s=15)
        received = collector.records()
        (root,) = [r for _, r in received if r.trace_id.hex() == otlp.trace_id]
        assert root.span_id.hex() == otlp.root  # the worker saw the trace's spans
        assert attributes(root.attributes)["gen_ai.evaluation.score.label"] == "unfaithful"
        received = [(res, r) for res, r in received if r.trace_id.hex() == TRACE]
        names = sorted(attributes(r.attributes)["gen_ai.evaluation.name"] for _, r in received)
        assert names == [  # once each; no signal; the checks that ran on the trace
            "ragmon.check.answer_length",
            "ragmon.check.citations_known",
            "ragmon.faithfulness",
            "ragmon.label.faithful",
        ]
        for _, record in received:
            assert record.event_name == "gen_ai.evaluation.result" and record.span_id == b""  # no spans seen
        by_name = {
            attributes(r.attributes)["gen_ai.evaluation.name"]: attributes(r.attributes) for _, r in received
        }
        faith = by_name["ragmon.faithfulness"]
        assert faith["gen_ai.evaluation.score.value"] == 0.9
        assert faith["gen_ai.evaluation.score.label"] == "faithful"
        assert by_name["ragmon.label.faithful"]["ragmon.annotator.kind"] == "HUMAN"
        assert by_name["ragmon.check.citations_known"]["gen_ai.evaluation.score.label"] == "fail"
        assert by_name["ragmon.check.answer_length"]["gen_ai.evaluation.score.label"] == "pass"
        assert worker.total("ragmon_evaluations_records_total", outcome="sent") == 5
        assert worker.total("ragmon_evaluations_skipped_total", reason="implicit_signal") == 1
        assert worker.total("ragmon_evaluations_requests_total", outcome="unavailable") >= 2
        assert worker.total("ragmon_worker_dead_letters_total") == 0
    finally:
        producer.close(timeout=5)
        labels.close()


def test_without_an_endpoint_the_worker_refuses_to_start_and_says_why(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMON_EVALUATIONS_")}
    env.update(worker_env(kafka_bootstrap, redis_url, topic_prefix))
    done = subprocess.run(
        [sys.executable, "-m", "workers.evaluations"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "RAGMON_EVALUATIONS_ENDPOINT" in done.stderr + done.stdout
