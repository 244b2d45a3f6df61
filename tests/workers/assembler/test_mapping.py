"""The OpenInference -> trace event mapping, row by row of the table in docs/otlp.md (pure)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from service.contracts import TraceBody
from tests.workers.assembler.oi_spans import MS, oi_span, rag_trace
from workers.assembler.documents import TRUNCATED_KEY, content_id
from workers.assembler.feedback import feedback_events
from workers.assembler.mapping import Assembled, TraceSpans, assemble
from workers.assembler.view import SpanView


def run(spans: list[Span], resource: dict[str, Any] | None = None) -> Assembled:
    return assemble(TraceSpans(spans[0].trace_id.hex(), [SpanView.of(s) for s in spans], resource or {}))


def body_of(spans: list[Span], resource: dict[str, Any] | None = None) -> dict[str, Any]:
    result = run(spans, resource)
    assert result.body is not None, (result.drop_reason, result.detail)
    TraceBody.model_validate(result.body)
    return result.body


def test_a_rag_trace_maps_to_every_field() -> None:
    spans = rag_trace()
    body = body_of(spans)
    assert body["trace_id"] == body["request_id"] == spans[0].trace_id.hex()
    assert body["query"] == {
        "text": "How do I reset my router?",
        "embedding": [0.1, 0.2, 0.3],
        "embedding_model": "text-embedding-3-small",
    }
    assert body["answer"] == {"text": "Hold the reset button for ten seconds."}
    docs = body["retrieval"]["documents"]
    assert [d["id"] for d in docs] == [
        "kb-1",
        content_id("Warranty terms."),
    ]  # metadata id, else a content hash
    assert docs[0]["score"] == 0.91 and docs[1]["score"] is None
    assert docs[0]["metadata"] == {"id": "kb-1", "locale": "en"}
    assert body["timings"] == {
        "total": 500.0,
        "embedding": 20.0,
        "retrieval": 50.0,
        "generation": 380.0,
        "ttft": 250.0,
    }
    assert body["usage"] == {
        "model": "gpt-4o-mini",
        "cost_usd": 0.00042,
        "tokens": {"prompt": 420, "completion": 35, "cached_prompt": 256, "reasoning": 5},
    }
    assert body["session_id"] == "sess-42"
    assert body["variant"] == "production" and body["intent"] == "billing"


def test_reranker_output_is_the_context_and_a_rerank_stage() -> None:
    body = body_of(rag_trace(with_reranker=True))
    assert [(d["id"], d["score"]) for d in body["retrieval"]["documents"]] == [("kb-1", 3.5)]
    assert body["timings"]["rerank"] == 20.0


def test_ragmon_attributes_from_span_metadata_and_resource() -> None:
    filters = {
        "entitlement": [{"field": "tenant", "op": "eq", "value": "acme"}],
        "relevance": [{"field": "locale", "op": "eq", "value": "en"}],
    }
    sample = {
        "candidates": [{"id": "kb-1", "score": 0.9, "metadata": {"locale": "en"}}],
        "gold_ids": ["kb-1"],
    }
    spans = rag_trace(
        root_attrs={
            "ragmon.request_id": "req-7",
            "ragmon.sample_rate": "0.25",
            "ragmon.retrieval.filters": json.dumps(filters),
            "ragmon.retrieval.exclusion_sample": json.dumps(sample),
        }
    )
    body = body_of(spans, resource={"ragmon.release": "2026.12.1", "ragmon.variant": "ignored-root-wins"})
    assert body["request_id"] == "req-7" and body["sample_rate"] == 0.25 and body["release"] == "2026.12.1"
    assert body["variant"] == "production"  # the root's metadata wins over the resource
    assert body["retrieval"]["filters"] == filters and body["retrieval"]["exclusion_sample"] == sample


def test_json_inputs_and_llm_output_messages() -> None:
    spans = rag_trace()
    root = spans[0]
    for item in root.attributes:
        if item.key == "input.value":
            item.value.string_value = json.dumps({"question": "What is the fee?"})
        if item.key == "input.mime_type":
            item.value.string_value = "application/json"
        if item.key == "output.value":
            item.value.string_value = json.dumps({"something": 1})
    body = body_of(spans)
    assert body["query"]["text"] == "What is the fee?"
    assert (
        body["answer"]["text"] == "Hold the reset button for ten seconds."
    )  # from the LLM's assistant message
    assert "embedding" not in body["query"]  # the embedded text is not this query


def test_redacted_vector_is_absent_and_dropped_attributes_mark_truncation() -> None:
    spans = rag_trace()
    embed, retriever = spans[1], spans[2]
    del embed.attributes[:]
    embed.attributes.add(key="openinference.span.kind").value.string_value = "EMBEDDING"
    embed.attributes.add(key="embedding.model_name").value.string_value = "m"
    embed.attributes.add(key="embedding.embeddings.0.embedding.vector").value.string_value = "__REDACTED__"
    retriever.dropped_attributes_count = 3
    body = body_of(spans)
    assert "embedding" not in body["query"] and "embedding_model" not in body["query"]
    assert all(d["metadata"][TRUNCATED_KEY] is True for d in body["retrieval"]["documents"])


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("plain_otel", "not_openinference"),
        ("chain_only", "no_retriever_or_llm"),
        ("no_query", "no_query"),
        ("bad_variant", "invalid_trace"),
        ("bad_sample_rate", "invalid_trace"),
    ],
)
def test_drop_reasons(case: str, reason: str) -> None:
    tid, t0 = os.urandom(16), 1_700_000_000_000_000_000
    if case == "plain_otel":
        spans = [oi_span(tid, None, "GET /", t0, 10)]
    elif case == "chain_only":
        spans = [oi_span(tid, "CHAIN", "rag", t0, 10, attrs={"input.value": "q"})]
    elif case == "no_query":
        spans = [oi_span(tid, "CHAIN", "rag", t0, 10), oi_span(tid, "LLM", "llm", t0, 5, b"x" * 8)]
    elif case == "bad_sample_rate":
        spans = rag_trace(root_attrs={"ragmon.sample_rate": "half"})
    else:
        spans = rag_trace(root_attrs={"ragmon.variant": "Not A Slug!"})
    result = run(spans)
    assert result.body is None and result.drop_reason == reason, result.detail
    if case == "bad_variant":
        assert result.detail.startswith("body.variant")


def test_costs_only_when_every_llm_call_reported_one() -> None:
    spans = rag_trace()
    spans.append(
        oi_span(
            spans[0].trace_id,
            "LLM",
            "rewrite",
            spans[0].start_time_unix_nano + 5 * MS,
            3,
            spans[0].span_id,
            {"llm.model_name": "small", "llm.token_count.prompt": 10},
        )
    )
    usage = body_of(spans)["usage"]
    assert "cost_usd" not in usage and usage["tokens"]["prompt"] == 430 and usage["model"] == "gpt-4o-mini"


def test_annotations_become_feedback_events() -> None:
    target = os.urandom(16)
    span = oi_span(
        os.urandom(16),
        None,
        "feedback",
        1_700_000_000_000_000_000,
        1,
        attrs={
            "annotations.0.annotation.name": "user_feedback",
            "annotations.0.annotation.label": "thumbs_down",
            "annotations.0.annotation.explanation": "wrong",
            "annotations.1.annotation.name": "correctness",
            "annotations.1.annotation.score": 0.2,
            "annotations.2.annotation.name": "regenerate",
            "annotations.2.annotation.score": 1,
        },
    )
    span.links.add(trace_id=target, span_id=os.urandom(8))
    view = SpanView.of(span)
    events, skipped = feedback_events("acme", span.trace_id.hex(), view)
    assert [e.body for e in events] == [
        {"trace_id": target.hex(), "kind": "thumbs", "value": False, "reason": "wrong"},
        {"trace_id": target.hex(), "kind": "regenerate", "value": 1},
    ]
    assert skipped == {"not_feedback": 1}
    again, _ = feedback_events("acme", span.trace_id.hex(), view)
    assert [e.id for e in again] == [e.id for e in events]  # a redelivered span yields the same event ids
