"""Query, answer, embedding, timings and usage of an OpenInference trace (pure; table in docs/otlp.md)."""

from __future__ import annotations

import math
from typing import Any

from service.contracts import vocabulary as L
from workers.assembler.view import SpanView, json_object

# OpenInference span kind -> the contract's stage name (metrics worker's default stages).
STAGE_OF_KIND = {
    "EMBEDDING": "embedding",
    "RETRIEVER": "retrieval",
    "RERANKER": "rerank",
    "LLM": "generation",
    "GUARDRAIL": "postprocess",
    "TOOL": "tool",
}
# llm.token_count.* -> the contract's token kinds. Cache writes have no token kind in the contract (v1):
# OpenInference counts them inside `prompt` already, so they are not lost from the prompt total.
TOKEN_ATTRIBUTES = {
    "llm.token_count.prompt": "prompt",
    "llm.token_count.completion": "completion",
    "llm.token_count.prompt_details.cache_read": "cached_prompt",
    "llm.token_count.completion_details.reasoning": "reasoning",
}
TEXT_KEYS = ("answer", "output", "result", "text", "content", "query", "question", "input")
FIRST_TOKEN_EVENTS = ("first token", "first_token")
REDACTED_VECTOR = "__REDACTED__"
_NUMBERS = frozenset({int, float})


def _plain(span: SpanView, key: str) -> str | None:
    """A `*.value` attribute as plain text; a JSON object yields its first known text field."""
    value = span.text(f"{key}.value")
    if value is None:
        return None
    mime = span.text(f"{key}.mime_type") or ""
    looks_json = value.lstrip().startswith("{")
    if mime != "application/json" and not (not mime and looks_json):
        return value
    parsed = json_object(value)
    return next((parsed[k] for k in TEXT_KEYS if isinstance(parsed.get(k), str) and parsed[k]), None)


def query_text(root: SpanView, retrievers: list[SpanView]) -> str | None:
    """The root's input, else the first retriever's (a chain called with a dict has a JSON root input)."""
    for span in (root, *retrievers):
        text = _plain(span, "input")
        if text:
            return text
    return None


def answer_text(root: SpanView, llms: list[SpanView]) -> str | None:
    """The root's output, else the last LLM's assistant message, else its output."""
    text = _plain(root, "output")
    if text:
        return text
    for llm in sorted(llms, key=lambda s: s.end_ns, reverse=True):
        messages = llm.indexed("llm.output_messages")
        for fields in reversed(messages.values()):
            content = fields.get("message.content")
            if isinstance(content, str) and content:
                return content
        text = _plain(llm, "output")
        if text:
            return text
    return None


def _vector(value: Any) -> list[float] | None:
    if value == REDACTED_VECTOR or not isinstance(value, list) or not 0 < len(value) <= L.MAX_EMBEDDING_DIM:
        return None
    if not set(map(type, value)) <= _NUMBERS or not all(map(math.isfinite, value)):  # bool is not a number
        return None
    return list(map(float, value))


def query_embedding(embedders: list[SpanView], query: str) -> dict[str, Any]:
    """{embedding, embedding_model} of the query, or {} (a hidden `__REDACTED__` vector or no model: absent).

    An embedding counts when its text is the query; one without text only when it is its span's only
    embedding (a batch of several is document indexing, not the query).
    """
    exact: list[tuple[list[float], str]] = []
    untexted: list[tuple[list[float], str]] = []
    for span in embedders:
        model = span.text("embedding.model_name")
        items = list(span.indexed("embedding.embeddings").values())
        for fields in items:
            vector = _vector(fields.get("embedding.vector"))
            if not model or vector is None:
                continue
            text = fields.get("embedding.text")
            if text == query:
                exact.append((vector, model))
            elif text is None and len(items) == 1:
                untexted.append((vector, model))
    chosen = exact or untexted
    if not chosen:
        return {}
    vector, model = chosen[0]
    return {"embedding": vector, "embedding_model": model[: L.MAX_ID_LEN]}


def timings(root: SpanView, spans: list[SpanView]) -> dict[str, float]:
    """Milliseconds: per stage the summed durations of its spans, total from the root, ttft from a first-token event."""
    out: dict[str, float] = {}
    for span in spans:
        stage = STAGE_OF_KIND.get(span.kind or "")
        if stage is not None and span.end_ns:
            out[stage] = out.get(stage, 0.0) + span.duration_ms
    if root.end_ns:
        out["total"] = root.duration_ms
    first_token = min(
        (t for s in spans for name, t in s.events if any(m in name.lower() for m in FIRST_TOKEN_EVENTS)),
        default=None,
    )
    if first_token is not None and first_token >= root.start_ns:
        out["ttft"] = (first_token - root.start_ns) / 1e6
    return {k: round(v, 3) for k, v in out.items() if 0 <= v <= L.MAX_TIMING_MS}


def usage(llms: list[SpanView]) -> dict[str, Any]:
    """Model of the last LLM call; tokens summed over every call; cost only when every call reported one."""
    out: dict[str, Any] = {}
    tokens: dict[str, int] = {}
    costs: list[float | None] = []
    for llm in llms:
        attrs = llm.attrs
        for key, kind in TOKEN_ATTRIBUTES.items():
            n = llm.number(key) if key in attrs else None  # most calls report two of the four
            if n is not None and n >= 0:
                tokens[kind] = tokens.get(kind, 0) + int(n)
        costs.append(llm.number("llm.cost.total"))
    last = max(llms, key=lambda s: s.end_ns, default=None)
    model = last.text("llm.model_name") if last is not None else None
    if model:
        out["model"] = model[: L.MAX_ID_LEN]
    if tokens:
        out["tokens"] = {k: min(v, L.MAX_TOKENS) for k, v in tokens.items()}
    if costs and all(c is not None and c >= 0 for c in costs):
        out["cost_usd"] = min(sum(c for c in costs if c is not None), L.MAX_COST_USD)
    return out
