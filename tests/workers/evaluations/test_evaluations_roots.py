"""Root span ids from the spans topic (workers/evaluations/roots.py), with the session's real Redis and
a real OTLP/HTTP logs endpoint: an evaluation of an OTLP trace names its root span."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from prometheus_client import CollectorRegistry

from tests.workers.evaluations.collector import Collector, attributes
from tests.workers.phoenix.phoenix_data import (
    exclusion_result,
    faithfulness_score,
    rag_trace,
    score_event,
    spans_event,
)
from workers.evaluations.metrics import EvaluationsMetrics
from workers.evaluations.processor import EvaluationExporter
from workers.evaluations.roots import RootSpans, root_key
from workers.evaluations.settings import EvaluationsSettings


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


def exporter(collector: Collector, client: redis.Redis) -> EvaluationExporter:
    settings = EvaluationsSettings(endpoint=collector.endpoint)
    return EvaluationExporter(
        settings, EvaluationsMetrics(CollectorRegistry()), RootSpans(client, 60), "t.spans"
    )


def test_the_spans_topic_is_read_beside_the_scores(collector: Collector, redis_client: redis.Redis) -> None:
    exp = exporter(collector, redis_client)
    assert [s.topic for s in exp.subscriptions] == ["t.spans"] and exp.event_types == ("score", "label")
    assert (
        EvaluationExporter(
            EvaluationsSettings(endpoint="http://x/v1/logs"), EvaluationsMetrics(CollectorRegistry())
        ).subscriptions
        == ()
    )


def test_a_record_names_the_root_span_of_its_trace(collector: Collector, redis_client: redis.Redis) -> None:
    exp = exporter(collector, redis_client)
    earlier, same_batch, unseen = rag_trace(["d1"]), rag_trace(["d2"]), rag_trace(["d3"])
    exp.process([spans_event(earlier)])
    assert collector.posts == 0  # spans are no evaluation
    assert redis_client.ttl(root_key("acme", earlier.trace_id)) > 0
    exp.process(
        [
            score_event(faithfulness_score(earlier.trace_id, mode="answer")),
            spans_event(same_batch, offset=1),
            score_event(exclusion_result(same_batch.trace_id, []), offset=2),
            score_event(faithfulness_score(unseen.trace_id, mode="answer"), offset=3),
        ]
    )
    by_trace = {r.trace_id.hex(): r for _, r in collector.records()}
    assert by_trace[earlier.trace_id].span_id.hex() == earlier.root
    assert by_trace[same_batch.trace_id].span_id.hex() == same_batch.root
    assert by_trace[unseen.trace_id].span_id == b""  # its spans never came: the trace only
    assert (
        attributes(by_trace[earlier.trace_id].attributes)["gen_ai.evaluation.name"] == "ragmon.faithfulness"
    )


def test_another_tenants_spans_give_no_root(collector: Collector, redis_client: redis.Redis) -> None:
    exp = exporter(collector, redis_client)
    trace = rag_trace(["d1"])
    exp.process([spans_event(trace, tenant="globex")])
    exp.process([score_event(faithfulness_score(trace.trace_id, mode="answer", tenant="acme"))])
    ((_, record),) = collector.records()
    assert record.trace_id.hex() == trace.trace_id and record.span_id == b""


def test_a_redis_outage_is_an_outage(collector: Collector) -> None:
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    exp = exporter(collector, dead)
    with pytest.raises(redis.ConnectionError):
        exp.process([spans_event(rag_trace(["d1"]))])
    assert collector.posts == 0
