"""OpenInference traces, spans-topic records and score events for the Phoenix tests."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData

from service.contracts.scores import (
    ExcludedGold,
    ExclusionResultEvent,
    FaithfulnessScoreEvent,
    ImplicitSignalEvent,
    ModelRef,
    UnsupportedSentence,
    exclusion_event_id,
    score_event_id,
    signal_event_id,
)
from service.contracts.spans import encode_span_record
from tests.support.phoenix import PhoenixServer
from tests.support.records import FakeRecord
from workers.runtime.records import decode_spans_record
from workers.runtime.types import Event


@dataclass(frozen=True)
class OtlpTrace:
    trace_id: str  # 32 hex
    root: str  # span ids, 16 hex
    retriever: str
    llm: str
    data: TracesData


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def rag_trace(doc_ids: list[str]) -> OtlpTrace:
    """A RAG request as an OpenInference instrumentor exports it: chain root, retriever, LLM."""
    tid, root, retriever, llm = os.urandom(16), os.urandom(8), os.urandom(8), os.urandom(8)
    now = time.time_ns()
    docs = [
        kv
        for i, d in enumerate(doc_ids)
        for kv in (
            _kv(f"retrieval.documents.{i}.document.id", d),
            _kv(f"retrieval.documents.{i}.document.content", f"text {d}"),
        )
    ]
    spans = [
        Span(
            trace_id=tid,
            span_id=root,
            name="rag",
            start_time_unix_nano=now,
            end_time_unix_nano=now + 900_000_000,
            attributes=[_kv("openinference.span.kind", "CHAIN"), _kv("input.value", "how do refunds work?")],
        ),
        Span(
            trace_id=tid,
            span_id=retriever,
            parent_span_id=root,
            name="retrieve",
            start_time_unix_nano=now,
            end_time_unix_nano=now + 50_000_000,
            attributes=[_kv("openinference.span.kind", "RETRIEVER"), *docs],
        ),
        Span(
            trace_id=tid,
            span_id=llm,
            parent_span_id=root,
            name="generate",
            start_time_unix_nano=now + 60_000_000,
            end_time_unix_nano=now + 850_000_000,
            attributes=[_kv("openinference.span.kind", "LLM"), _kv("output.value", "Refunds take 5 days.")],
        ),
    ]
    data = TracesData(
        resource_spans=[
            ResourceSpans(
                resource={"attributes": [_kv("service.name", "rag-app")]},
                scope_spans=[ScopeSpans(spans=spans)],
            )
        ]
    )
    return OtlpTrace(tid.hex(), root.hex(), retriever.hex(), llm.hex(), data)


def spans_event(trace: OtlpTrace, tenant: str = "acme", offset: int = 0) -> Event:
    key, value, headers = encode_span_record(tenant, trace.trace_id, trace.data)
    decoded = decode_spans_record(
        FakeRecord(value, headers, "t.spans", 0, offset, key, int(time.time() * 1000))
    )
    assert isinstance(decoded, Event)
    return decoded


def _scored_trace(source: uuid.UUID, trace_id: str, tenant: str) -> dict[str, Any]:
    """The fields every score event of a production trace carries: where it came from and when."""
    return {
        "source_event_id": source,
        "tenant": tenant,
        "trace_id": trace_id,
        "request_id": f"r-{trace_id}",
        "variant": "production",
        "trace_timestamp": datetime.now(UTC),
        "scored_at": datetime.now(UTC),
    }


def faithfulness_score(
    trace_id: str,
    *,
    score: float = 0.2,
    mode: str = "sentences",
    outcome: str = "scored",
    tenant: str = "acme",
) -> FaithfulnessScoreEvent:
    source = uuid.uuid4()
    unsupported = (
        [UnsupportedSentence(index=1, text="Refunds take 5 days.", score=0.08)] if mode == "sentences" else []
    )
    extra: dict[str, Any] = {"sentences_total": 2, "sentences_supported": 1} if mode == "sentences" else {}
    common: dict[str, Any] = {
        "event_id": score_event_id(source, mode, "sha256:abc"),
        **_scored_trace(source, trace_id, tenant),
        "mode": mode,
        "threshold": 0.5,
        "model": ModelRef(source="/models/hhem", revision="sha256:abc"),
        "app_sample_rate": 1.0,
        "scorer_sample_rate": 1.0,
    }
    if outcome == "no_claims":
        return FaithfulnessScoreEvent(**common, outcome="no_claims", no_claims_reason="refused")
    return FaithfulnessScoreEvent(
        **common,
        release="v7",
        outcome="scored",
        score=score,
        below_threshold=score < 0.5,
        unsupported_sentences=unsupported,
        **extra,
    )


def exclusion_result(
    trace_id: str, excluded: list[str], *, eligible: int = 1, tenant: str = "acme"
) -> ExclusionResultEvent:
    source = uuid.uuid4()
    return ExclusionResultEvent(
        event_id=exclusion_event_id(source, "labels"),
        **_scored_trace(source, trace_id, tenant),
        gold_source="labels",
        eligible_gold=eligible,
        surviving_gold=eligible - len(excluded),
        falsely_excluded=None if eligible == 0 else len(excluded) == eligible,
        excluded_gold=[ExcludedGold(doc_id=d, predicates=["locale eq"]) for d in excluded],
    )


def reformulation(trace_id: str, *, by_trace_id: str = "f" * 32) -> ImplicitSignalEvent:
    """An implicit signal (the query reformulated by `by_trace_id`): a score event that is no evaluation."""
    now = datetime.now(UTC)
    source = uuid.uuid4()
    return ImplicitSignalEvent(
        event_id=signal_event_id(source, "reformulation"),
        source_event_id=source,
        tenant="acme",
        trace_id=trace_id,
        signal="reformulation",
        by_trace_id=by_trace_id,
        trace_timestamp=now,
        scored_at=now,
    )


def score_event(
    score: FaithfulnessScoreEvent | ExclusionResultEvent | ImplicitSignalEvent, offset: int = 0
) -> Event:
    from service.contracts.scores import score_record
    from workers.runtime.decode import decode_record

    key, value, headers = score_record(score)
    decoded = decode_record(
        FakeRecord(value, headers, "t.scores", 0, offset, key, int(time.time() * 1000)), "score"
    )
    assert isinstance(decoded, Event)
    return decoded


def wait_for(probe: Any, timeout_s: float = 15.0, every_s: float = 0.2) -> Any:
    """Poll `probe()` until it returns something truthy; return it (fail with the last value)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"condition not met within {timeout_s}s; last value {last!r}")


def root_span(phoenix: PhoenixServer, trace_id: str, project: str = "acme") -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{phoenix.base_url}/v1/projects/{project}/spans",
        headers=phoenix.headers,
        timeout=5,
        params={"trace_id": [trace_id], "parent_id": "null"},
    )
    if answer.status_code == 404:  # the project is created with its first span: not there yet
        return []
    answer.raise_for_status()
    return list(answer.json()["data"])


def span_annotations(phoenix: PhoenixServer, span_id: str, project: str = "acme") -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{phoenix.base_url}/v1/projects/{project}/span_annotations",
        headers=phoenix.headers,
        timeout=5,
        params={"span_ids": [span_id]},
    )
    answer.raise_for_status()
    return list(answer.json()["data"])


def document_annotations(phoenix: PhoenixServer, span_global_id: str) -> list[dict[str, Any]]:
    """Phoenix's REST API has no read route for document annotations; its GraphQL API (same server) does."""
    query = (
        "query($id: ID!) { node(id: $id) { ... on Span { documentEvaluations { "
        "name label score explanation documentPosition } } } }"
    )
    answer = httpx.post(
        f"{phoenix.base_url}/graphql",
        headers=phoenix.headers,
        timeout=5,
        json={"query": query, "variables": {"id": span_global_id}},
    )
    answer.raise_for_status()
    return list(answer.json()["data"]["node"]["documentEvaluations"])
