"""The forwarder and the exporter as worker processes: Kafka -> Phoenix, through a Phoenix outage.

Real Tansu broker, real Redis, real Phoenix (stopped and started again on the
same ports and database): spans forwarded from the spans topic appear in
Phoenix with ragmon's annotations on their root span; while Phoenix is down
nothing is committed or dead-lettered, and once it is back every span and
annotation arrives exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer

from service.contracts import Topics
from service.contracts.scores import score_record
from service.contracts.spans import encode_span_record
from tests.conftest import LOG_DIR
from tests.support.kafka import committed_total
from tests.support.phoenix import PhoenixServer
from tests.support.workers import WorkerProcess, wait_ready, worker_env
from tests.workers.phoenix.phoenix_data import (
    OtlpTrace,
    faithfulness_score,
    rag_trace,
    span_annotations,
    wait_for,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def workers(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, phoenix: PhoenixServer
) -> Iterator[tuple[WorkerProcess, WorkerProcess]]:
    env = worker_env(
        kafka_bootstrap,
        redis_url,
        topic_prefix,
        RAGMON_WORKER_RETRY_MAX_S="1",
        RAGMON_WORKER_LAG_INTERVAL_S="0.5",
        RAGMON_PHOENIX_URL=phoenix.base_url,
        RAGMON_PHOENIX_API_KEY=phoenix.api_key,
        RAGMON_PHOENIX_RETRY_INTERVAL_S="1",
        RAGMON_PHOENIX_TIMEOUT_S="3",
        RAGMON_FORWARD_ENDPOINT=f"{phoenix.base_url}/v1/traces",
        RAGMON_FORWARD_HEADERS=f"Authorization=Bearer%20{phoenix.api_key}",
        RAGMON_FORWARD_TIMEOUT_S="3",
    )
    started: list[WorkerProcess] = []
    try:
        for name in ("forwarder", "phoenix"):
            started.append(WorkerProcess(f"workers.{name}", env, LOG_DIR / f"{name}-{topic_prefix}.log"))
            wait_ready(started[-1], 60)
        yield started[0], started[1]
    finally:
        for w in started:
            w.stop()


def send(producer: KafkaProducer, topics: Topics, trace: OtlpTrace) -> None:
    key, value, headers = encode_span_record("acme", trace.trace_id, trace.data)
    producer.send(topics.spans, key=key, value=value, headers=headers)
    key, value, headers = score_record(faithfulness_score(trace.trace_id, score=0.2, mode="answer"))
    producer.send(topics.scores, key=key, value=value, headers=headers)
    producer.flush(timeout=10)


def lag_drained(worker: WorkerProcess) -> bool:
    lags = [v for (name, _), v in worker.scrape().items() if name == "ragmon_worker_consumer_lag_messages"]
    return bool(lags) and sum(lags) == 0


def annotated(phoenix: PhoenixServer, trace: OtlpTrace) -> list[dict[str, object]]:
    try:
        return [a for a in span_annotations(phoenix, trace.root) if a["name"] == "ragmon.faithfulness"]
    except Exception:  # Phoenix still starting
        return []


def test_spans_and_annotations_reach_phoenix_once_across_an_outage(
    workers: tuple[WorkerProcess, WorkerProcess],
    phoenix: PhoenixServer,
    kafka_bootstrap: str,
    topic_prefix: str,
) -> None:
    forwarder, exporter = workers
    topics = Topics(topic_prefix)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    try:
        first, second = rag_trace(["d1", "d2"]), rag_trace(["d9"])
        producer.send(topics.scores, key=b"acme/x", value=b'{"type": "faithfulness_score", "tenant": "acme"}')
        send(producer, topics, first)
        (annotation,) = wait_for(lambda: annotated(phoenix, first), timeout_s=30)
        assert annotation["result"]["label"] == "unfaithful"  # type: ignore[index]
        wait_for(lambda: exporter.total("ragmon_worker_dead_letters_total", reason="invalid_score") == 1)

        phoenix.stop()
        try:
            send(producer, topics, second)
            wait_for(
                lambda: (
                    forwarder.total("ragmon_worker_retries_total") >= 2
                    and exporter.total("ragmon_worker_retries_total") >= 2
                ),
                timeout_s=30,
            )
            committed, end = committed_total(kafka_bootstrap, f"{topic_prefix}-phoenix", topics.scores)
            assert (committed, end) == (2, 3)  # the second score is not committed while Phoenix is down
        finally:
            phoenix.start()

        (annotation,) = wait_for(lambda: annotated(phoenix, second), timeout_s=40)
        assert annotation["span_id"] == second.root
        wait_for(
            lambda: committed_total(kafka_bootstrap, f"{topic_prefix}-phoenix", topics.scores)[0] == 3,
            timeout_s=15,
        )
        assert exporter.total("ragmon_phoenix_annotations_total", kind="faithfulness", outcome="sent") == 2
        assert forwarder.total("ragmon_forwarder_spans_total", outcome="forwarded") == 6
        # The malformed score went to the dead-letter topic (bad input); the outage did not.
        assert exporter.total("ragmon_worker_dead_letters_total") == 1
        assert exporter.total("ragmon_worker_dead_letters_total", reason="invalid_score") == 1
        assert forwarder.total("ragmon_worker_dead_letters_total") == 0
        # The forwarder's lag is exposed and drains to zero once Phoenix takes spans again.
        wait_for(lambda: lag_drained(forwarder), timeout_s=10)
    finally:
        producer.close(timeout=5)


@pytest.mark.parametrize(
    ("worker", "variable"), [("phoenix", "RAGMON_PHOENIX_URL"), ("forwarder", "RAGMON_FORWARD_ENDPOINT")]
)
def test_without_an_endpoint_the_worker_refuses_to_start_and_says_why(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, worker: str, variable: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGMON_PHOENIX_", "RAGMON_FORWARD_"))}
    env.update(worker_env(kafka_bootstrap, redis_url, topic_prefix))
    done = subprocess.run(
        [sys.executable, "-m", f"workers.{worker}"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert variable in done.stderr + done.stdout
