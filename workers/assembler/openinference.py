"""The OpenInference reader: `openinference.span.kind` spans -> the neutral model (table in docs/otlp.md)."""

from __future__ import annotations

from typing import Any

from workers.assembler.neutral import Embedding, RawDocument
from workers.assembler.view import SpanView, json_object
from workers.runtime import boundedjson

KIND_KEY = "openinference.span.kind"
# llm.token_count.* -> the contract's token kinds. Cache writes have no token kind in the contract (v1):
# OpenInference counts them inside `prompt` already, so they are not lost from the prompt total.
TOKEN_ATTRIBUTES = {
    "llm.token_count.prompt": "prompt",
    "llm.token_count.completion": "completion",
    "llm.token_count.prompt_details.cache_read": "cached_prompt",
    "llm.token_count.completion_details.reasoning": "reasoning",
}
TEXT_KEYS = ("answer", "output", "result", "text", "content", "query", "question", "input")
# The GenAI conventions' array first: OpenInference instrumentors that follow them set it on LLM spans.
FINISH_KEYS = ("gen_ai.response.finish_reasons", "llm.finish_reason", "ragmon.finish_reason")
DOCUMENT_PREFIX = {"RETRIEVER": "retrieval.documents", "RERANKER": "reranker.output_documents"}


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


def _output_finish(span: SpanView) -> Any:
    """A JSON `output.value`'s `choices[0].finish_reason` (OpenAI's raw response) or `stop_reason` (Anthropic's)."""
    output = span.attrs.get("output.value")
    if not (
        isinstance(output, str)
        and output.startswith("{")
        and span.attrs.get("output.mime_type") == "application/json"
    ):
        return None
    try:
        parsed = boundedjson.loads(output)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    choices = parsed.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        found = choices[0].get("finish_reason")
        if isinstance(found, str) and found:
            return found
    return parsed.get("stop_reason")


class OpenInferenceReader:
    name = "openinference"
    counts_unknown = False  # OpenInference spans carry many attributes ragmon has no use for

    def kind(self, view: SpanView) -> str | None:
        return view.kind

    def input_text(self, view: SpanView) -> str | None:
        return _plain(view, "input")

    def output_text(self, view: SpanView) -> str | None:
        return _plain(view, "output")

    def question(self, view: SpanView) -> str | None:
        return None  # an OpenInference trace's question is its root's (or a retriever's) input

    def answers(self, view: SpanView) -> list[str]:
        messages = view.indexed("llm.output_messages")
        return [c for f in messages.values() if isinstance(c := f.get("message.content"), str) and c]

    def documents(self, view: SpanView) -> list[RawDocument]:
        prefix = DOCUMENT_PREFIX.get(view.kind or "")
        if prefix is None:
            return []
        return [
            RawDocument(
                f.get("document.id"),
                f.get("document.content"),
                f.get("document.score"),
                f.get("document.metadata"),
            )
            for f in view.indexed(prefix).values()
        ]

    def embedding_model(self, view: SpanView) -> str | None:
        return view.text("embedding.model_name")

    def embeddings(self, view: SpanView) -> list[Embedding]:
        items = view.indexed("embedding.embeddings").values()
        return [Embedding(f.get("embedding.vector"), f.get("embedding.text")) for f in items]

    def tokens(self, view: SpanView, kind: str | None) -> dict[str, int]:
        if kind != "LLM":
            return {}
        out: dict[str, int] = {}
        attrs = view.attrs
        for key, token_kind in TOKEN_ATTRIBUTES.items():
            n = view.number(key) if key in attrs else None  # most calls report two of the four
            if n is not None and n >= 0:
                out[token_kind] = int(n)
        return out

    def model(self, view: SpanView) -> str | None:
        return view.text("llm.model_name")

    def cost(self, view: SpanView) -> float | None:
        return view.number("llm.cost.total")

    def finish_reason(self, view: SpanView) -> Any:
        attrs = view.attrs
        for key in FINISH_KEYS:
            value = attrs.get(key)
            if isinstance(value, list):
                value = value[0] if value else None
            if isinstance(value, str) and value:
                return value
        return _output_finish(view)

    def error_type(self, view: SpanView) -> str | None:
        return None  # OpenInference says it with the span status and its exception event

    def first_token_ns(self, view: SpanView) -> int | None:
        return None  # the first-token span events, read for every span (mapping.py)

    def unknown_attributes(self, view: SpanView) -> int:
        return 0


OPENINFERENCE = OpenInferenceReader()
