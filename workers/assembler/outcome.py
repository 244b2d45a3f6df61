"""A trace's error and its generation's finish reason, from its neutral spans (pure; the table is in docs/otlp.md).

Error. A trace is errored when its root span has status ERROR, or when a span failed (status ERROR) and
the trace has no answer: a failure the app retried past, with an answer in the end, is not an error of
the trace. A span failed when its status is ERROR or its convention gave an error type (GenAI's
`error.type`). The failing span is the earliest failed span below the root (else the root); its kind
gives the stage and its exception event (`exception.type`, `exception.message`), status message and
error type the type, by the words providers and their SDKs use: rate limits and 429s, timeouts and
deadlines, context-length refusals, content filters, 5xx and connection failures; anything else is
`other`. Only a bounded prefix of each text is read (view.MAX_ERROR_TEXT), with substring tests.

Finish reason. The last LLM span's, as its readers found it (openinference.py, genai.py), mapped onto
the contract's closed set.
"""

from __future__ import annotations

import re
from typing import Any

from workers.assembler.neutral import NeutralSpan

STAGE_OF_KIND = {
    "LLM": "generation",
    "RETRIEVER": "retrieval",
    "RERANKER": "rerank",
    "EMBEDDING": "embedding",
    "GUARDRAIL": "postprocess",
    "TOOL": "tool",
}
RETRYABLE = frozenset({"timeout", "rate_limit", "provider_error"})
# (error type, words in the lower-cased exception type, message or status message), first match wins.
_ERROR_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rate_limit", ("ratelimit", "rate limit", "rate_limit", "too many requests", "429", "quota", "throttl")),
    ("timeout", ("timeout", "timed out", "deadline", "time out")),
    (
        "context_length",
        (
            "context_length",
            "context length",
            "maximum context",
            "context window",
            "prompt is too long",
            "too many tokens",
            "max_tokens_exceeded",
        ),
    ),
    (
        "content_filter",
        (
            "content_filter",
            "content filter",
            "content policy",
            "contentpolicy",
            "safety",
            "responsibleai",
            "moderation",
        ),
    ),
    (
        "provider_error",
        (
            "internalservererror",
            "internal server",
            "service unavailable",
            "serviceunavailable",
            "bad gateway",
            "overloaded",
            "apiconnection",
            "connection",
            "apierror",
            "api error",
            "server error",
            "upstream",
        ),
    ),
)
_STATUS_5XX = re.compile(r"\b5\d\d\b")
_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "eos": "stop",
    "complete": "stop",
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
    "safety": "content_filter",
    "recitation": "content_filter",
    "blocklist": "content_filter",
    "prohibited_content": "content_filter",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
}


def error_type(*texts: str) -> str:
    text = " ".join(texts).lower()
    for kind, words in _ERROR_WORDS:
        if any(w in text for w in words):
            return kind
    return "provider_error" if _STATUS_5XX.search(text) else "other"


def trace_error(root: NeutralSpan, spans: list[NeutralSpan], answered: bool) -> dict[str, Any] | None:
    """The contract's `error` of a trace (spans in start order), or None."""
    failed = [s for s in spans if s.failed]
    if not failed or (answered and not root.failed):
        return None
    below = [s for s in failed if s is not root]
    culprit = below[0] if below else root
    etype = error_type(*culprit.error_texts)
    stage = STAGE_OF_KIND.get(culprit.kind or "", "generation" if culprit is root else "other")
    return {"type": etype, "stage": stage, "retryable": etype in RETRYABLE}


def _reason(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if not isinstance(value, str) or not value:
        return None
    return _FINISH.get(value.strip().lower()[:64], "other")


def finish_reason(llms: list[NeutralSpan]) -> str | None:
    """The contract's `answer.finish_reason` from the last LLM span to end, or None."""
    if not llms:
        return None
    return _reason(max(llms, key=lambda s: s.end_ns).finish_reason)
