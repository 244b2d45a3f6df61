"""OpenInference spans of a small RAG request, as protobuf, for the assembler tests."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span, TracesData

from tests.service.api.otlp_builders import kv
from workers.assembler.assembler import Assembler
from workers.runtime.decode import Undecodable
from workers.runtime.records import decode_spans_record

MS = 1_000_000


def store_records(assembler: Assembler, records: list[Any]) -> int:
    """What the shared runtime does with these spans-topic records before tick: decode each with its spans
    decoder and hand the decoded ones to the assembler; returns how many it would dead-letter instead."""
    decoded = [decode_spans_record(r) for r in records]
    assembler.store_spans([e.body for e in decoded if not isinstance(e, Undecodable)])
    return sum(isinstance(e, Undecodable) for e in decoded)


def bare_span(trace_id: bytes, name: str, start_ns: int, duration_ms: float, parent: bytes = b"") -> Span:
    """A span with a fresh id and its times, no attributes: what each convention's builder starts from."""
    return Span(
        trace_id=trace_id,
        span_id=os.urandom(8),
        parent_span_id=parent,
        name=name,
        start_time_unix_nano=start_ns,
        end_time_unix_nano=start_ns + int(duration_ms * MS),
    )


def oi_span(
    trace_id: bytes,
    kind: str | None,
    name: str,
    start_ns: int,
    duration_ms: float,
    parent: bytes = b"",
    attrs: dict[str, Any] | None = None,
) -> Span:
    span = bare_span(trace_id, name, start_ns, duration_ms, parent)
    merged = {"openinference.span.kind": kind, **(attrs or {})} if kind else dict(attrs or {})
    for key, value in merged.items():
        if isinstance(value, list):
            item = span.attributes.add(key=key)
            for x in value:
                item.value.array_value.values.add(double_value=float(x))
        else:
            span.attributes.append(kv(key, value))
    return span


def rag_trace(
    trace_id: bytes | None = None,
    *,
    query: str = "How do I reset my router?",
    answer: str = "Hold the reset button for ten seconds.",
    root_attrs: dict[str, Any] | None = None,
    with_reranker: bool = False,
    start_ns: int | None = None,
) -> list[Span]:
    """root CHAIN (0-500 ms) > EMBEDDING (10-30) , RETRIEVER (30-80), [RERANKER (80-100)], LLM (100-480)."""
    tid = trace_id or os.urandom(16)
    t0 = start_ns or time.time_ns() - 2_000 * MS
    root = oi_span(
        tid,
        "CHAIN",
        "rag",
        t0,
        500,
        attrs={
            "input.value": query,
            "input.mime_type": "text/plain",
            "output.value": answer,
            "session.id": "sess-42",
            "metadata": json.dumps({"ragmon.variant": "production", "ragmon.intent": "billing"}),
            **(root_attrs or {}),
        },
    )
    rid = root.span_id
    spans = [
        root,
        oi_span(
            tid,
            "EMBEDDING",
            "embed",
            t0 + 10 * MS,
            20,
            rid,
            {
                "embedding.model_name": "text-embedding-3-small",
                "embedding.embeddings.0.embedding.text": query,
                "embedding.embeddings.0.embedding.vector": [0.1, 0.2, 0.3],
            },
        ),
        oi_span(
            tid,
            "RETRIEVER",
            "retrieve",
            t0 + 30 * MS,
            50,
            rid,
            {
                "input.value": query,
                "retrieval.documents.0.document.content": "Routers reset with the pin button.",
                "retrieval.documents.0.document.metadata": json.dumps({"id": "kb-1", "locale": "en"}),
                "retrieval.documents.0.document.score": 0.91,
                "retrieval.documents.1.document.content": "Warranty terms.",
                "retrieval.documents.1.document.metadata": json.dumps({"source": "terms page.pdf"}),
            },
        ),
    ]
    if with_reranker:
        spans.append(
            oi_span(
                tid,
                "RERANKER",
                "rerank",
                t0 + 80 * MS,
                20,
                rid,
                {
                    "reranker.query": query,
                    "reranker.output_documents.0.document.id": "kb-1",
                    "reranker.output_documents.0.document.content": "Routers reset with the pin button.",
                    "reranker.output_documents.0.document.score": 3.5,
                },
            )
        )
    llm = oi_span(
        tid,
        "LLM",
        "llm",
        t0 + 100 * MS,
        380,
        rid,
        {
            "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": 420,
            "llm.token_count.completion": 35,
            "llm.token_count.prompt_details.cache_read": 256,
            "llm.token_count.completion_details.reasoning": 5,
            "llm.cost.total": 0.00042,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
        },
    )
    llm.events.add(name="First Token Stream Event", time_unix_nano=t0 + 250 * MS)
    spans.append(llm)
    return spans


def traces_data(spans: list[Span], resource: dict[str, Any] | None = None) -> TracesData:
    data = TracesData()
    rs = data.resource_spans.add()
    rs.resource.attributes.extend(
        kv(k, v) for k, v in {"service.name": "rag-app", **(resource or {})}.items()
    )
    rs.scope_spans.add().spans.extend(spans)
    return data
