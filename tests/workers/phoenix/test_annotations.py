"""Pure parts of the exporter and forwarder: score -> annotation, trace ids, settings, record decoding."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import SecretStr

from service.contracts.config import ConfigError
from service.contracts.scores import score_record
from tests.support.records import FakeRecord
from tests.workers.phoenix.phoenix_data import (
    exclusion_result,
    faithfulness_score,
    rag_trace,
    spans_event,
)
from workers.forwarder.settings import ForwarderSettings
from workers.forwarder.settings import load_settings as load_forwarder_settings
from workers.phoenix.annotations import (
    MAX_EXPLANATION,
    Plan,
    TraceSpans,
    faithfulness_result,
    phoenix_trace_id,
    plan_exclusion,
    plan_faithfulness,
)
from workers.phoenix.annotations import (
    exclusion_result as exclusion_annotation,
)
from workers.phoenix.gateway import retriever_documents
from workers.phoenix.settings import PhoenixSettings, load_settings
from workers.runtime.decode import Undecodable, decode_record
from workers.runtime.records import decode_spans_record
from workers.runtime.types import Event

TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (TRACE, TRACE),
        (TRACE.upper(), TRACE),
        ("0" * 32, None),
        ("trace-42", None),
        (TRACE + "0", None),
    ],
)
def test_only_otlp_trace_ids_name_a_phoenix_trace(given: str, expected: str | None) -> None:
    assert phoenix_trace_id(given) == expected


def test_faithfulness_labels_scores_and_explanations() -> None:
    low = faithfulness_result(faithfulness_score(TRACE, score=0.2, mode="answer"))
    assert low == {
        "label": "unfaithful",
        "score": 0.2,
        "explanation": "HHEM-2.1-Open P(consistent) = 0.200; threshold 0.500",
    }
    assert faithfulness_result(faithfulness_score(TRACE, score=0.8, mode="answer"))["label"] == "faithful"
    sentences = faithfulness_result(faithfulness_score(TRACE, score=0.5, mode="sentences"))
    assert sentences["label"] == "faithful"
    assert sentences["explanation"].endswith("unsupported: [1] Refunds take 5 days. (0.080)")
    refused = faithfulness_result(faithfulness_score(TRACE, outcome="no_claims"))
    assert refused["label"] == "no_claims" and "score" not in refused and "refusal" in refused["explanation"]


def test_sentence_mode_adds_one_upserting_annotation_per_unsupported_sentence() -> None:
    plan = Plan()
    plan_faithfulness(faithfulness_score(TRACE, mode="sentences"), "b7ad6b7169203331", plan)
    assert [(p.kind, p.payload["name"], p.payload["identifier"]) for p in plan.spans] == [
        ("faithfulness", "ragmon.faithfulness", "ragmon-sentences"),
        ("faithfulness_sentence", "ragmon.faithfulness.sentence", "sentence-1"),
    ]
    assert {p.payload["span_id"] for p in plan.spans} == {"b7ad6b7169203331"}


def test_exclusion_verdicts_and_document_placement() -> None:
    assert exclusion_annotation(exclusion_result(TRACE, []))["label"] == "not_excluded"
    assert exclusion_annotation(exclusion_result(TRACE, [], eligible=0))["label"] == "no_eligible_gold"
    plan = Plan()
    trace = TraceSpans(root="r" * 16, documents={"gold-1": ("s" * 16, 3)})
    plan_exclusion(exclusion_result(TRACE, ["gold-1", "gold-2"], eligible=2), trace, plan)
    (span,) = plan.spans
    assert span.payload["result"]["label"] == "falsely_excluded" and span.payload["result"]["score"] == 1.0
    assert "gold-2 (by locale eq)" in span.payload["result"]["explanation"]
    (document,) = plan.documents
    assert (document.payload["span_id"], document.payload["document_position"]) == ("s" * 16, 3)
    assert "identifier" not in document.payload  # Phoenix refuses identifiers on document annotations
    assert plan.documents_not_found == 1


def test_long_explanations_are_clipped() -> None:
    score = faithfulness_score(TRACE, mode="sentences")
    long = score.model_copy(
        update={
            "unsupported_sentences": [
                s.model_copy(update={"text": "x" * 5000}) for s in score.unsupported_sentences
            ]
        }
    )
    plan = Plan()
    plan_faithfulness(long, "b7ad6b7169203331", plan)
    assert all(len(p.payload["result"]["explanation"]) <= MAX_EXPLANATION for p in plan.spans)


def test_retriever_documents_from_flat_and_nested_attributes() -> None:
    flat = {
        "retrieval.documents.0.document.id": "a",
        "retrieval.documents.2.document.id": "c",
        "retrieval.documents.0.document.content": "text",
    }
    assert retriever_documents(flat) == {"a": 0, "c": 2}
    nested = {
        "retrieval": {
            "documents": [{"document": {"id": "a"}}, {"document": {"score": 0.3}}, {"document": {"id": 7}}]
        }
    }
    assert retriever_documents(nested) == {"a": 0, "7": 2}


def test_document_ids_follow_the_assemblers_rule() -> None:
    """LangChain sets no document.id: the metadata's id, else a content hash (docs/otlp.md)."""
    attributes = {
        "retrieval.documents.0.document.metadata": '{"doc_id": "kb-12", "source": "faq"}',
        "retrieval.documents.0.document.content": "refunds",
        "retrieval.documents.1.document.content": "shipping",
        "retrieval.documents.2.document.metadata": {"document_id": "kb-40"},
    }
    content_hash = "sha256:" + hashlib.sha256(b"shipping").hexdigest()[:32]
    assert retriever_documents(attributes) == {"kb-12": 0, content_hash: 1, "kb-40": 2}


def test_settings_fail_fast_and_say_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGMON_PHOENIX_URL", raising=False)
    with pytest.raises(ConfigError, match="RAGMON_PHOENIX_URL"):
        load_settings()
    monkeypatch.setenv("RAGMON_PHOENIX_URL", "http://127.0.0.1:6006")
    monkeypatch.setenv("RAGMON_PHOENIX_TENANT_PROJECTS", '{"acme": "acme-rag"}')
    settings = load_settings()
    assert (settings.project_for("acme"), settings.project_for("globex")) == ("acme-rag", "globex")
    monkeypatch.setenv("RAGMON_PHOENIX_TIMEOUT_S", "0")
    with pytest.raises(ConfigError, match="RAGMON_PHOENIX_TIMEOUT_S"):
        load_settings()
    monkeypatch.delenv("RAGMON_FORWARD_ENDPOINT", raising=False)
    with pytest.raises(ConfigError, match="RAGMON_FORWARD_ENDPOINT"):
        load_forwarder_settings()


def test_forwarder_headers_are_parsed_like_otel_exporter_headers() -> None:
    settings = ForwarderSettings(
        endpoint="http://x/v1/traces", headers=SecretStr("Authorization=Bearer%20k3y, x-tenant = acme")
    )
    assert settings.header_map() == {"Authorization": "Bearer k3y", "x-tenant": "acme"}
    with pytest.raises(ConfigError, match="'oops' is not 'name=value'"):
        ForwarderSettings(endpoint="http://x", headers=SecretStr("oops")).header_map()


def test_score_and_span_records_decode_or_say_why_not() -> None:
    score = exclusion_result(TRACE, ["g"])
    key, value, headers = score_record(score)
    event = decode_record(FakeRecord(value, headers, "t.scores", 0, 5, key), "score")
    assert isinstance(event, Event) and event.body == score
    assert (event.id, event.type, event.tenant) == (str(score.event_id), "score", "acme")
    bad = decode_record(
        FakeRecord(value.replace(b'"labels"', b'"gut"'), headers, "t.scores", 0, 6, key), "score"
    )
    assert isinstance(bad, Undecodable) and bad.reason == "invalid_score" and "gold_source" in bad.detail
    spans = spans_event(rag_trace(["d"]))
    assert spans.body.span_count == 3 and spans.type == "otlp_spans"
    broken = decode_spans_record(FakeRecord(b"\xff\x00garbage", spans.headers, "t.spans", 0, 1))
    assert isinstance(broken, Undecodable) and broken.reason == "invalid_spans"


def test_phoenix_settings_defaults_are_off() -> None:
    assert PhoenixSettings().url == "" and ForwarderSettings().endpoint == ""
