"""The deterministic answer checks published as `gen_ai.evaluation.result` records (docs/otlp.md).

The exporter reads traces, runs workers/checks on each with the config's `checks` section, and sends one
record per check that ran to a real OTLP/HTTP endpoint on 127.0.0.1, decoded with opentelemetry-proto.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from tests.support.decoded import decoded_event
from tests.workers.evaluations.collector import Collector, attributes
from workers.checks.config import ChecksConfig
from workers.evaluations.metrics import EvaluationsMetrics
from workers.evaluations.processor import EvaluationExporter
from workers.evaluations.records import EVENT_NAME
from workers.evaluations.settings import EvaluationsSettings
from workers.evaluations.views import VIEWS
from workers.runtime.types import Event

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CHECKS = ChecksConfig(forbidden=[{"name": "internal-host", "pattern": r"\.corp\.internal\b"}])


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


def exporter(collector: Collector, checks: ChecksConfig | None = CHECKS) -> tuple[EvaluationExporter, Any]:
    registry = CollectorRegistry()
    config = EvaluationsSettings(endpoint=collector.endpoint, headers=SecretStr(""))
    return EvaluationExporter(config, EvaluationsMetrics(registry), checks=checks), registry


def trace(answer: dict[str, Any], documents: list[dict[str, str]], **extra: Any) -> Event:
    now = datetime.now(UTC)
    body = {
        "trace_id": TRACE,
        "request_id": "req-1",
        "variant": "production",
        "release": "v7",
        "intent": "billing",
        "query": {"text": "what is the fee?"},
        "retrieval": {"documents": documents},
        "answer": answer,
        **extra,
    }
    stored = {"id": uuid.uuid4(), "type": "trace", "tenant": "acme", "timestamp": now, "received_at": now}
    return decoded_event({**stored, "body": body}, VIEWS, topic="t.traces")


def by_name(collector: Collector) -> dict[str, dict[str, Any]]:
    out = {}
    for _, record in collector.records():
        assert record.event_name == EVENT_NAME
        assert record.trace_id == bytes.fromhex(TRACE)
        attrs = attributes(record.attributes)
        out[attrs["gen_ai.evaluation.name"]] = attrs
    return out


def test_each_check_that_ran_is_one_record_with_its_outcome_and_reason(collector: Collector) -> None:
    exp, registry = exporter(collector)
    docs = [{"id": "d1", "text": "The fee is 12.50 EUR per month."}]
    answer = {"text": "The fee is 19.99 EUR, see fees.corp.internal [d1][d9].", "citations": ["d1", "d9"]}
    assert exp.event_types == ("score", "label", "trace")
    exp.process([trace(answer, docs)])

    got = by_name(collector)
    # json_valid and json_schema do not run on a text answer: no record, not a "pass"
    assert set(got) == {
        "ragmon.check.citations_known",
        "ragmon.check.answer_length",
        "ragmon.check.forbidden_patterns",
        "ragmon.check.figures_grounded",
    }
    cited = got["ragmon.check.citations_known"]
    assert cited["gen_ai.evaluation.score.label"] == "fail"
    assert cited["gen_ai.evaluation.score.value"] == 0.0
    assert "'d9'" in cited["gen_ai.evaluation.explanation"]
    assert got["ragmon.check.forbidden_patterns"]["gen_ai.evaluation.score.label"] == "fail"
    assert "internal-host" in got["ragmon.check.forbidden_patterns"]["gen_ai.evaluation.explanation"]
    assert got["ragmon.check.figures_grounded"]["gen_ai.evaluation.score.label"] == "fail"
    length = got["ragmon.check.answer_length"]
    assert (
        length["gen_ai.evaluation.score.label"] == "pass" and length["gen_ai.evaluation.score.value"] == 1.0
    )
    assert "gen_ai.evaluation.explanation" not in length
    assert length["ragmon.annotator.kind"] == "CODE" and length["ragmon.evaluator"] == "ragmon.checks"
    assert (length["ragmon.variant"], length["ragmon.release"], length["ragmon.intent"]) == (
        "production",
        "v7",
        "billing",
    )
    assert value(registry, "ragmon_evaluations_built_total", kind="check") == 4
    assert value(registry, "ragmon_evaluations_records_total", outcome="sent") == 4


def test_json_answers_are_checked_for_validity(collector: Collector) -> None:
    exp, _ = exporter(collector)
    exp.process([trace({"text": '{"fee": '}, [], response_format={"type": "json"})])
    got = by_name(collector)
    assert got["ragmon.check.json_valid"]["gen_ai.evaluation.score.label"] == "fail"
    assert "ragmon.check.figures_grounded" not in got  # not run on JSON answers


def test_the_same_trace_again_gives_the_same_evaluation_ids(collector: Collector) -> None:
    exp, _ = exporter(collector)
    event = trace({"text": "Fine."}, [])
    exp.process([event])
    exp.process([event])  # a redelivery: the backend deduplicates on ragmon.evaluation.id
    ids = [attributes(r.attributes)["ragmon.evaluation.id"] for _, r in collector.records()]
    assert len(ids) == 4 and len(set(ids)) == 2  # answer_length and forbidden_patterns, twice each


def test_errored_traces_are_skipped_and_checks_can_be_off(collector: Collector) -> None:
    exp, registry = exporter(collector)
    failed = trace({"text": ""}, [], error={"stage": "generation", "type": "timeout"})
    exp.process([failed])
    assert collector.posts == 0
    assert value(registry, "ragmon_evaluations_skipped_total", reason="errored_trace") == 1
    off, _ = exporter(collector, checks=None)
    assert off.event_types == ("score", "label")  # the traces topic is not even read
    off_by_config, _ = exporter(collector, checks=ChecksConfig(enabled=False))
    assert off_by_config.event_types == ("score", "label")


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0
