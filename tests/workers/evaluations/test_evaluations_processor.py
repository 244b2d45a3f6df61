"""The evaluation exporter against a real OTLP/HTTP logs endpoint on 127.0.0.1.

The endpoint is a small HTTP server (real sockets, real gzip, real protobuf
parsing with opentelemetry-proto) whose answers the test scripts (503, 400,
413, partial success); every record it receives is decoded and checked:
event name, trace id, attributes and their values.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceResponse,
)
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from service.local.embedded import free_port
from tests.support.decoded import decoded_event
from tests.workers.evaluations.collector import Collector, attributes
from tests.workers.phoenix.phoenix_data import (
    exclusion_result,
    faithfulness_score,
    reformulation,
    score_event,
)
from workers.evaluations.metrics import EvaluationsMetrics
from workers.evaluations.processor import CollectorUnavailable, EvaluationExporter
from workers.evaluations.records import EVENT_NAME
from workers.evaluations.settings import EvaluationsSettings
from workers.runtime.types import Event

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


def exporter(collector: Collector, **settings: Any) -> tuple[EvaluationExporter, CollectorRegistry]:
    registry = CollectorRegistry()
    config = EvaluationsSettings(
        endpoint=collector.endpoint, headers=SecretStr("Authorization=Bearer%20k"), **settings
    )
    return EvaluationExporter(config, EvaluationsMetrics(registry)), registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def label(trace_id: str, **body: Any) -> Event:
    now = datetime.now(UTC)
    stored = {
        "id": uuid.uuid4(),
        "type": "label",
        "tenant": "acme",
        "timestamp": now,
        "received_at": now,
        "body": {"trace_id": trace_id, **body},
    }
    return decoded_event(stored, None, topic="t.labels")


def test_every_evaluation_is_a_gen_ai_evaluation_result_record(collector: Collector) -> None:
    exp, registry = exporter(collector)
    faith = faithfulness_score(TRACE, score=0.5 - 0.25, mode="sentences")  # 1 of 2 sentences supported
    excl = exclusion_result(TRACE, ["doc-7"])
    exp.process(
        [score_event(faith), score_event(excl), label(TRACE, faithful=False, answerable=True, gold_ids=["d"])]
    )

    (headers, _), *_ = collector.requests
    assert headers["Authorization"] == "Bearer k" and headers["Content-Encoding"] == "gzip"
    assert headers["Content-Type"] == "application/x-protobuf"
    received = collector.records()
    assert len(received) == 5
    resource, _ = received[0]
    assert resource == {"service.name": "ragmon", "ragmon.tenant": "acme"}
    by_name = {
        attributes(r.attributes)["gen_ai.evaluation.name"]: (r, attributes(r.attributes)) for _, r in received
    }
    assert set(by_name) == {
        "ragmon.faithfulness",
        "ragmon.faithfulness.sentence",
        "ragmon.false_exclusion",
        "ragmon.label.faithful",
        "ragmon.label.answerable",
    }
    for record, attrs in by_name.values():
        assert record.event_name == EVENT_NAME == "gen_ai.evaluation.result"
        assert record.trace_id.hex() == TRACE
        assert record.span_id == b""  # this exporter has no root-span store (test_evaluations_roots.py)
        assert record.severity_text == "INFO" and record.time_unix_nano > 0
        assert attrs["ragmon.tenant"] == "acme" and attrs["ragmon.trace_id"] == TRACE
        assert uuid.UUID(attrs["ragmon.evaluation.id"])
        assert "error.type" not in attrs and "gen_ai.response.id" not in attrs

    record, answer = by_name["ragmon.faithfulness"]
    assert record.time_unix_nano == int(faith.scored_at.timestamp() * 1e9)
    assert answer["gen_ai.evaluation.score.value"] == 0.25
    assert answer["gen_ai.evaluation.score.label"] == "unfaithful"
    assert answer["gen_ai.evaluation.explanation"].startswith("1/2 sentences supported")
    assert answer["ragmon.evaluator"] == "hhem-2.1-open"
    assert answer["ragmon.evaluator.version"] == "sha256:abc"
    assert answer["ragmon.annotator.kind"] == "CODE"
    assert answer["ragmon.inclusion_probability"] == 1.0
    assert answer["ragmon.faithfulness.mode"] == "sentences"
    assert answer["ragmon.variant"] == "production" and answer["ragmon.release"] == "v7"
    assert answer["ragmon.score_event.id"] == str(faith.event_id)
    assert "ragmon.intent" not in answer  # absent stays absent

    _, sentence = by_name["ragmon.faithfulness.sentence"]
    assert sentence["gen_ai.evaluation.score.label"] == "unsupported"
    assert sentence["gen_ai.evaluation.score.value"] == 0.08
    assert sentence["gen_ai.evaluation.explanation"] == "Refunds take 5 days."
    assert sentence["ragmon.faithfulness.sentence_index"] == 1
    assert sentence["ragmon.evaluation.id"] != answer["ragmon.evaluation.id"]

    _, exclusion = by_name["ragmon.false_exclusion"]
    assert exclusion["gen_ai.evaluation.score.label"] == "falsely_excluded"
    assert exclusion["gen_ai.evaluation.score.value"] == 1.0
    assert "doc-7 (by locale eq)" in exclusion["gen_ai.evaluation.explanation"]
    assert exclusion["ragmon.exclusion.gold_source"] == "labels"
    assert exclusion["ragmon.exclusion.eligible_gold"] == 1
    assert exclusion["ragmon.annotator.kind"] == "CODE"

    _, faithful = by_name["ragmon.label.faithful"]
    assert faithful["gen_ai.evaluation.score.label"] == "unfaithful"
    assert faithful["gen_ai.evaluation.score.value"] == 0.0
    assert faithful["ragmon.annotator.kind"] == "HUMAN"
    _, answerable = by_name["ragmon.label.answerable"]
    assert (answerable["gen_ai.evaluation.score.label"], answerable["gen_ai.evaluation.score.value"]) == (
        "answerable",
        1.0,
    )

    assert value(registry, "ragmon_evaluations_records_total", outcome="sent") == 5
    assert value(registry, "ragmon_evaluations_requests_total", outcome="ok") == 1
    assert value(registry, "ragmon_evaluations_built_total", kind="faithfulness_sentence") == 1


def test_the_same_score_gives_the_same_evaluation_ids(collector: Collector) -> None:
    exp, _ = exporter(collector)
    faith = faithfulness_score(TRACE, mode="answer")
    exp.process([score_event(faith)])
    exp.process([score_event(faith, offset=1)])  # a redelivery
    first, second = (attributes(r.attributes) for _, r in collector.records())
    assert first["ragmon.evaluation.id"] == second["ragmon.evaluation.id"]
    assert first["gen_ai.evaluation.score.label"] == "unfaithful"
    assert first["gen_ai.evaluation.explanation"] == "HHEM-2.1-Open P(consistent) = 0.200; threshold 0.500"


def test_no_claims_has_a_label_and_no_score(collector: Collector) -> None:
    exp, _ = exporter(collector)
    exp.process([score_event(faithfulness_score(TRACE, mode="answer", outcome="no_claims"))])
    ((_, record),) = collector.records()
    attrs = attributes(record.attributes)
    assert attrs["gen_ai.evaluation.score.label"] == "no_claims"
    assert "gen_ai.evaluation.score.value" not in attrs


def test_a_trace_id_that_is_no_otlp_trace_id_is_sent_without_one(collector: Collector) -> None:
    exp, _ = exporter(collector)
    exp.process([score_event(exclusion_result("checkout-42", [], eligible=0))])
    ((_, record),) = collector.records()
    attrs = attributes(record.attributes)
    assert record.trace_id == b"" and attrs["ragmon.trace_id"] == "checkout-42"
    assert attrs["gen_ai.evaluation.score.label"] == "no_eligible_gold"
    assert "gen_ai.evaluation.score.value" not in attrs


def test_implicit_signals_and_gold_only_labels_are_skipped(collector: Collector) -> None:
    exp, registry = exporter(collector)
    exp.process([score_event(reformulation(TRACE)), label(TRACE, gold_ids=["d1"])])
    assert collector.posts == 0
    assert value(registry, "ragmon_evaluations_skipped_total", reason="implicit_signal") == 1
    assert value(registry, "ragmon_evaluations_skipped_total", reason="gold_only") == 1
    exp.process([score_event(reformulation(TRACE)), score_event(faithfulness_score(TRACE, mode="answer"))])
    assert len(collector.records()) == 1  # only the score


def test_a_503_is_retried_and_the_batch_delivered_once(collector: Collector) -> None:
    exp, registry = exporter(collector)
    collector.answers = [(503, b"busy")]
    batch = [score_event(faithfulness_score(TRACE, mode="answer"))]
    with pytest.raises(CollectorUnavailable, match="503"):
        exp.process(batch)  # the runtime's outage policy: not ready, nothing committed, retried
    assert collector.records() == []
    assert value(registry, "ragmon_evaluations_requests_total", outcome="unavailable") == 1
    assert value(registry, "ragmon_evaluations_records_total", outcome="sent") == 0
    exp.process(batch)  # the runtime's retry of the same batch
    assert collector.posts == 2 and len(collector.records()) == 1
    assert value(registry, "ragmon_evaluations_records_total", outcome="sent") == 1
    assert value(registry, "ragmon_evaluations_built_total", kind="faithfulness") == 1  # counted once


@pytest.mark.parametrize("status", [429, 500, 401])
def test_outages_raise_so_the_batch_is_retried(collector: Collector, status: int) -> None:
    exp, registry = exporter(collector)
    collector.answers = [(status, b"")]
    with pytest.raises(CollectorUnavailable, match=str(status)):
        exp.process([score_event(faithfulness_score(TRACE, mode="answer"))])
    assert value(registry, "ragmon_evaluations_requests_total", outcome="unavailable") == 1


def test_a_400_is_counted_as_refused_and_not_retried(collector: Collector) -> None:
    exp, registry = exporter(collector)
    collector.answers = [(400, b"bad log records")]
    exp.process([score_event(faithfulness_score(TRACE, mode="sentences"))])  # 2 records
    assert collector.records() == [] and collector.posts == 1
    assert value(registry, "ragmon_evaluations_records_total", outcome="rejected") == 2
    assert value(registry, "ragmon_evaluations_requests_total", outcome="rejected") == 1
    assert value(registry, "ragmon_evaluations_records_total", outcome="sent") == 0


def test_too_large_is_split_and_limits_are_kept(collector: Collector) -> None:
    exp, registry = exporter(collector, max_records_per_request=3, gzip=False)
    collector.answers = [(413, b"")]
    exp.process([score_event(faithfulness_score(TRACE, mode="sentences"), offset=i) for i in range(3)])
    sizes = [
        sum(len(sl.log_records) for rl in req.resource_logs for sl in rl.scope_logs)
        for _, req in collector.requests
    ]
    assert sizes == [1, 2, 3]  # 413 on the first 3: halves of 1 and 2; then the last 3
    assert value(registry, "ragmon_evaluations_requests_total", outcome="too_large") == 1
    assert value(registry, "ragmon_evaluations_records_total", outcome="sent") == 6


def test_partial_success_counts_the_rejected_records(collector: Collector) -> None:
    exp, registry = exporter(collector)
    partial = ExportLogsServiceResponse(
        partial_success=ExportLogsPartialSuccess(rejected_log_records=1, error_message="too old")
    )
    collector.answers = [(200, partial.SerializeToString())]
    exp.process([score_event(faithfulness_score(TRACE, mode="sentences"))])
    assert value(registry, "ragmon_evaluations_records_total", outcome="sent") == 1
    assert value(registry, "ragmon_evaluations_records_total", outcome="rejected") == 1


def test_an_unreachable_endpoint_is_an_outage() -> None:
    registry = CollectorRegistry()
    nobody = EvaluationsSettings(endpoint=f"http://127.0.0.1:{free_port()}/v1/logs", timeout_s=2)
    exp = EvaluationExporter(nobody, EvaluationsMetrics(registry))
    with pytest.raises(CollectorUnavailable, match="ConnectError"):
        exp.process([score_event(faithfulness_score(TRACE, mode="answer"))])
    assert value(registry, "ragmon_evaluations_requests_total", outcome="unavailable") == 1


def test_sentence_text_can_be_kept_out(collector: Collector) -> None:
    exp, _ = exporter(collector, include_text=False)
    exp.process([score_event(faithfulness_score(TRACE, mode="sentences"))])
    texts = [
        attributes(r.attributes).get("gen_ai.evaluation.explanation", "") for _, r in collector.records()
    ]
    assert not any("Refunds" in t for t in texts)


def test_tenants_get_a_resource_each(collector: Collector) -> None:
    exp, _ = exporter(collector)
    exp.process(
        [
            score_event(faithfulness_score(TRACE, mode="answer", tenant="acme")),
            score_event(faithfulness_score(TRACE, mode="answer", tenant="globex"), offset=1),
        ]
    )
    ((_, req),) = collector.requests
    tenants = [attributes(rl.resource.attributes)["ragmon.tenant"] for rl in req.resource_logs]
    assert tenants == ["acme", "globex"]


def test_a_missing_endpoint_or_bad_header_fails_at_start() -> None:
    from service.contracts.config import ConfigError

    with pytest.raises(ConfigError, match="RAGMON_EVALUATIONS_ENDPOINT"):
        EvaluationsSettings().check_startup()
    with pytest.raises(ConfigError, match="RAGMON_EVALUATIONS_HEADERS"):
        EvaluationsSettings(endpoint="http://x/v1/logs", headers=SecretStr("novalue")).check_startup()
