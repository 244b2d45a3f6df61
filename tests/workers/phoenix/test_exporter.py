"""The exporter and the forwarder against a real Phoenix (and a real Redis), without Kafka.

Spans reach Phoenix through the forwarder's processor; annotations are read
back through Phoenix's REST API (document annotations through its GraphQL API,
which has the only read route for them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from tests.support.phoenix import PhoenixServer
from tests.workers.phoenix.phoenix_data import (
    document_annotations,
    exclusion_result,
    faithfulness_score,
    rag_trace,
    reformulation,
    root_span,
    score_event,
    span_annotations,
    spans_event,
    wait_for,
)
from workers.forwarder.metrics import ForwarderMetrics
from workers.forwarder.processor import SpanForwarder
from workers.forwarder.settings import ForwarderSettings
from workers.phoenix.gateway import PhoenixGateway, PhoenixUnavailable
from workers.phoenix.metrics import PhoenixMetrics
from workers.phoenix.processor import PhoenixExporter
from workers.phoenix.settings import PhoenixSettings
from workers.phoenix.waiting import WaitingRoom

pytestmark = pytest.mark.slow


class Rig:
    def __init__(self, phoenix: PhoenixServer, client: redis.Redis, **overrides: object) -> None:
        self.registry = CollectorRegistry()
        self.settings = PhoenixSettings(url=phoenix.base_url, api_key=SecretStr(phoenix.api_key), **overrides)
        self.metrics = PhoenixMetrics(self.registry)
        self.now = time.time()
        self.waiting = WaitingRoom(
            client, "test-phoenix", self.settings.retry_interval_s, self.settings.max_waiting
        )
        self.exporter = PhoenixExporter(
            self.settings,
            PhoenixGateway(self.settings, self.metrics),
            self.waiting,
            self.metrics,
            clock=lambda: self.now,
        )
        forward = ForwarderSettings(
            endpoint=f"{phoenix.base_url}/v1/traces",
            headers=SecretStr(f"Authorization=Bearer%20{phoenix.api_key}"),
        )
        self.forwarder = SpanForwarder(forward, ForwarderMetrics(self.registry), "t.spans")

    def count(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def close(self) -> None:
        self.exporter.close()
        self.forwarder.close()


@pytest.fixture
def rig(phoenix: PhoenixServer, redis_client: redis.Redis) -> Iterator[Rig]:
    r = Rig(phoenix, redis_client)
    yield r
    r.close()


def by_name(annotations: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {(a["name"], a["identifier"]): a for a in annotations}


def test_forwarded_spans_carry_ragmon_annotations(rig: Rig, phoenix: PhoenixServer) -> None:
    trace = rag_trace(["d1", "gold-7", "d3"])
    rig.forwarder.process([spans_event(trace)])
    assert rig.count("ragmon_forwarder_spans_total", outcome="forwarded") == 3
    root = wait_for(lambda: root_span(phoenix, trace.trace_id))[0]
    assert root["context"]["span_id"] == trace.root

    rig.exporter.process(
        [
            score_event(faithfulness_score(trace.trace_id, score=0.5 / 2)),
            score_event(exclusion_result(trace.trace_id, ["gold-7"])),
        ]
    )

    got = by_name(span_annotations(phoenix, trace.root))
    answer = got[("ragmon.faithfulness", "ragmon-sentences")]["result"]
    assert answer["label"] == "unfaithful" and answer["score"] == 0.25  # type: ignore[index]
    assert (
        "1/2 sentences supported" in answer["explanation"] and "Refunds take 5 days." in answer["explanation"]
    )  # type: ignore[index]
    sentence = got[("ragmon.faithfulness.sentence", "sentence-1")]["result"]
    assert sentence == {"label": "unsupported", "score": 0.08, "explanation": "Refunds take 5 days."}
    exclusion = got[("ragmon.false_exclusion", "ragmon-labels")]["result"]
    assert exclusion["label"] == "falsely_excluded" and "gold-7 (by locale eq)" in exclusion["explanation"]  # type: ignore[index]
    retriever = wait_for(
        lambda: [s for s in _spans(phoenix, trace.trace_id) if s["span_kind"] == "RETRIEVER"]
    )[0]
    docs = document_annotations(phoenix, retriever["id"])
    assert [(d["name"], d["documentPosition"], d["label"]) for d in docs] == [
        ("ragmon.excluded_gold", 1, "excluded")
    ]
    assert rig.count("ragmon_phoenix_annotations_total", kind="faithfulness", outcome="sent") == 1
    assert rig.count("ragmon_phoenix_annotations_total", kind="excluded_document", outcome="sent") == 1


def _spans(phoenix: PhoenixServer, trace_id: str) -> list[dict[str, object]]:
    import httpx

    answer = httpx.get(
        f"{phoenix.base_url}/v1/projects/acme/spans",
        headers=phoenix.headers,
        params={"trace_id": [trace_id]},
        timeout=5,
    )
    return list(answer.json()["data"])


def test_a_re_export_updates_the_annotation_instead_of_adding_one(rig: Rig, phoenix: PhoenixServer) -> None:
    trace = rag_trace(["d1"])
    rig.forwarder.process([spans_event(trace)])
    wait_for(lambda: root_span(phoenix, trace.trace_id))
    rig.exporter.process([score_event(faithfulness_score(trace.trace_id, score=0.9, mode="answer"))])
    rig.exporter.process([score_event(faithfulness_score(trace.trace_id, score=0.1, mode="answer"))])
    mine = [a for a in span_annotations(phoenix, trace.root) if a["name"] == "ragmon.faithfulness"]
    assert len(mine) == 1
    assert mine[0]["result"]["label"] == "unfaithful" and mine[0]["result"]["score"] == 0.1  # type: ignore[index]


def test_a_score_waits_for_its_trace_then_lands(rig: Rig, phoenix: PhoenixServer) -> None:
    trace = rag_trace(["d1"])
    rig.exporter.process([score_event(faithfulness_score(trace.trace_id, outcome="no_claims"))])
    assert (
        rig.waiting.size() == 1
        and rig.count("ragmon_phoenix_annotations_total", kind="faithfulness", outcome="sent") == 0
    )
    rig.forwarder.process([spans_event(trace)])
    wait_for(lambda: root_span(phoenix, trace.trace_id))
    rig.now += rig.settings.retry_interval_s + 1
    rig.exporter.tick(rig.now)
    assert rig.waiting.size() == 0
    (annotation,) = span_annotations(phoenix, trace.root)
    assert annotation["result"]["label"] == "no_claims" and annotation["result"]["score"] is None  # type: ignore[index]


def test_scores_without_a_phoenix_trace_are_counted_not_kept(
    phoenix: PhoenixServer, redis_client: redis.Redis
) -> None:
    rig = Rig(phoenix, redis_client, span_wait_s=30.0, retry_interval_s=10.0)
    try:
        never = rag_trace(["d1"])  # its spans never reach Phoenix
        rig.exporter.process(
            [
                score_event(faithfulness_score(never.trace_id)),
                score_event(faithfulness_score("native-trace-42")),
                # a signal, not an evaluation: skipped
                score_event(reformulation(never.trace_id, by_trace_id="later")),
            ]
        )
        assert rig.count("ragmon_phoenix_annotations_total", kind="faithfulness", outcome="untraceable") == 1
        assert rig.waiting.size() == 1  # the faithfulness score of `never` waits; the signal does not
        for _ in range(3):  # retried every interval until the wait is over, then dropped and counted
            rig.now += 11
            rig.exporter.tick(rig.now)
        assert rig.waiting.size() == 0
        assert (
            rig.count("ragmon_phoenix_annotations_total", kind="faithfulness", outcome="trace_not_found") == 1
        )
    finally:
        rig.close()


def test_a_wrong_key_is_an_outage_not_a_rejection(phoenix: PhoenixServer, redis_client: redis.Redis) -> None:
    rig = Rig(phoenix, redis_client)
    rig.settings = PhoenixSettings(url=phoenix.base_url, api_key=SecretStr("not-the-key"))
    gateway = PhoenixGateway(rig.settings, rig.metrics)
    try:
        with pytest.raises(PhoenixUnavailable, match="401"):
            gateway.find_traces("default", [rag_trace([]).trace_id])
        assert rig.count("ragmon_phoenix_requests_total", endpoint="get_spans", outcome="unavailable") == 1
    finally:
        gateway.close()
        rig.close()


def test_a_tenants_project_is_used_on_both_sides(phoenix: PhoenixServer, redis_client: redis.Redis) -> None:
    rig = Rig(phoenix, redis_client, tenant_projects={"globex": "globex-rag"})
    forward = ForwarderSettings(
        endpoint=f"{phoenix.base_url}/v1/traces",
        tenant_projects={"globex": "globex-rag"},
        headers=SecretStr(f"Authorization=Bearer%20{phoenix.api_key}"),
    )
    rig.forwarder = SpanForwarder(forward, ForwarderMetrics(CollectorRegistry()), "t.spans")
    try:
        trace = rag_trace(["d1"])
        rig.forwarder.process([spans_event(trace, tenant="globex")])
        wait_for(
            lambda: (
                _project_exists(phoenix, "globex-rag") and root_span(phoenix, trace.trace_id, "globex-rag")
            )
        )
        rig.exporter.process(
            [score_event(faithfulness_score(trace.trace_id, mode="answer", tenant="globex"))]
        )
        (annotation,) = span_annotations(phoenix, trace.root, "globex-rag")
        assert annotation["name"] == "ragmon.faithfulness"
    finally:
        rig.close()


def _project_exists(phoenix: PhoenixServer, name: str) -> bool:
    import httpx

    answer = httpx.get(f"{phoenix.base_url}/v1/projects", headers=phoenix.headers, timeout=5)
    return name in [p["name"] for p in answer.json()["data"]]
