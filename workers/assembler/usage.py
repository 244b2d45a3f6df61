"""Query, answer, embedding, timings and usage of a trace, from its neutral spans (pure; docs/otlp.md)."""

from __future__ import annotations

import math
from typing import Any

from service.contracts import vocabulary as L
from workers.assembler.neutral import NeutralSpan

# The neutral span kind -> the contract's stage name (metrics worker's default stages).
STAGE_OF_KIND = {
    "EMBEDDING": "embedding",
    "RETRIEVER": "retrieval",
    "RERANKER": "rerank",
    "LLM": "generation",
    "GUARDRAIL": "postprocess",
    "TOOL": "tool",
}
FIRST_TOKEN_EVENTS = ("first token", "first_token")
REDACTED_VECTOR = "__REDACTED__"
_NUMBERS = frozenset({int, float})


def query_text(root: NeutralSpan, retrievers: list[NeutralSpan], llms: list[NeutralSpan]) -> str | None:
    """The root's input, else the first retriever's query, else the first LLM call's user question."""
    for span in (root, *retrievers):
        text = span.input_text
        if text:
            return text
    return next((q for llm in llms if (q := llm.question)), None)


def answer_text(root: NeutralSpan, llms: list[NeutralSpan]) -> str | None:
    """The root's output, else the last LLM's last output message, else its output."""
    text = root.output_text
    if text:
        return text
    for llm in sorted(llms, key=lambda s: s.end_ns, reverse=True):
        answers = llm.answers
        if answers:
            return answers[-1]
        text = llm.output_text
        if text:
            return text
    return None


def _vector(value: Any) -> list[float] | None:
    if value == REDACTED_VECTOR or not isinstance(value, list) or not 0 < len(value) <= L.MAX_EMBEDDING_DIM:
        return None
    if not set(map(type, value)) <= _NUMBERS or not all(map(math.isfinite, value)):  # bool is not a number
        return None
    return list(map(float, value))


def query_embedding(embedders: list[NeutralSpan], query: str) -> dict[str, Any]:
    """{embedding, embedding_model} of the query, or {} (a hidden `__REDACTED__` vector or no model: absent).

    An embedding counts when its text is the query; one without text only when it is its span's only
    embedding (a batch of several is document indexing, not the query).
    """
    exact: list[tuple[list[float], str]] = []
    untexted: list[tuple[list[float], str]] = []
    for span in embedders:
        items = span.embeddings
        if not items:
            continue
        model = span.embedding_model
        for item in items:
            vector = _vector(item.vector)
            if not model or vector is None:
                continue
            if item.text == query:
                exact.append((vector, model))
            elif item.text is None and len(items) == 1:
                untexted.append((vector, model))
    chosen = exact or untexted
    if not chosen:
        return {}
    vector, model = chosen[0]
    return {"embedding": vector, "embedding_model": model[: L.MAX_ID_LEN]}


def _first_token(spans: list[NeutralSpan]) -> int | None:
    """The earliest first token: a span event named so (LangChain's), else a convention's own (GenAI's)."""
    marks = [t for s in spans for name, t in s.events if any(m in name.lower() for m in FIRST_TOKEN_EVENTS)]
    if not marks:
        marks = [t for s in spans if s.kind == "LLM" and (t := s.first_token_ns) is not None]
    return min(marks, default=None)


def timings(root: NeutralSpan, spans: list[NeutralSpan]) -> dict[str, float]:
    """Milliseconds: per stage the summed durations of its spans, total from the root, ttft from a first token."""
    out: dict[str, float] = {}
    for span in spans:
        stage = STAGE_OF_KIND.get(span.kind or "")
        if stage is not None and span.end_ns:
            out[stage] = out.get(stage, 0.0) + span.duration_ms
    if root.end_ns:
        out["total"] = root.duration_ms
    first_token = _first_token(spans)
    if first_token is not None and first_token >= root.start_ns:
        out["ttft"] = (first_token - root.start_ns) / 1e6
    return {k: round(v, 3) for k, v in out.items() if 0 <= v <= L.MAX_TIMING_MS}


def usage(llms: list[NeutralSpan], embedders: list[NeutralSpan]) -> dict[str, Any]:
    """Model of the last LLM call; tokens summed over every call; cost only when every LLM call reported one."""
    out: dict[str, Any] = {}
    tokens: dict[str, int] = {}
    for span in (*llms, *embedders):
        for kind, n in span.tokens.items():
            tokens[kind] = tokens.get(kind, 0) + n
    costs = [llm.cost for llm in llms]
    last = max(llms, key=lambda s: s.end_ns, default=None)
    model = last.model if last is not None else None
    if model:
        out["model"] = model[: L.MAX_ID_LEN]
    if tokens:
        out["tokens"] = {k: min(v, L.MAX_TOKENS) for k, v in tokens.items()}
    if costs and all(c is not None and c >= 0 for c in costs):
        out["cost_usd"] = min(sum(c for c in costs if c is not None), L.MAX_COST_USD)
    return out
