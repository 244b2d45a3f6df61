"""A trace's error and finish reason from OTLP spans (workers/assembler/outcome.py, docs/otlp.md): span status
ERROR and exception events become the contract's `error`, the instrumentations' finish reasons its
`answer.finish_reason`; a failure the app retried past is no error of the trace."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.service.api.otlp_builders import kv
from tests.workers.assembler.oi_spans import rag_trace
from tests.workers.assembler.test_mapping import body_of
from workers.assembler.outcome import error_type


def _fail(span: Span, exc_type: str = "", message: str = "", status_message: str = "") -> None:
    span.status.code = Status.STATUS_CODE_ERROR
    span.status.message = status_message
    if exc_type or message:
        event = span.events.add(name="exception", time_unix_nano=span.end_time_unix_nano)
        event.attributes.extend([kv("exception.type", exc_type), kv("exception.message", message)])


def _kind(spans: list[Span], kind: str) -> Span:
    for span in spans:
        for a in span.attributes:
            if a.key == "openinference.span.kind" and a.value.string_value == kind:
                return span
    raise AssertionError(kind)


def _set(span: Span, key: str, value: object) -> None:
    kept = [a for a in span.attributes if a.key != key]
    del span.attributes[:]
    span.attributes.extend([*kept, kv(key, value)])


def _no_answer(spans: list[Span]) -> None:
    for span in spans:
        kept = [
            a
            for a in span.attributes
            if a.key not in ("output.value", "llm.output_messages.0.message.content")
        ]
        del span.attributes[:]
        span.attributes.extend(kept)


def test_a_failed_llm_call_without_an_answer_is_an_error_of_the_generation() -> None:
    spans = rag_trace()
    _no_answer(spans)
    _fail(_kind(spans, "LLM"), "openai.RateLimitError", "Error code: 429 - Rate limit reached for gpt-4o")
    _fail(spans[0], "openai.RateLimitError", "Error code: 429")
    body = body_of(spans)
    assert body["error"] == {"type": "rate_limit", "stage": "generation", "retryable": True}
    assert body["answer"]["text"] == ""


def test_the_failing_span_gives_the_stage() -> None:
    spans = rag_trace()
    _no_answer(spans)
    _fail(_kind(spans, "RETRIEVER"), "TimeoutError", "vector store did not answer in 5s")
    _fail(spans[0], "TimeoutError")
    assert body_of(spans)["error"] == {"type": "timeout", "stage": "retrieval", "retryable": True}


def test_a_failure_the_app_retried_past_is_no_error_of_the_trace() -> None:
    spans = rag_trace()  # the LLM span failed once, the answer came from the retry
    _fail(_kind(spans, "LLM"), "openai.APIConnectionError", "Connection error.")
    assert "error" not in body_of(spans)


def test_a_failed_root_is_an_error_even_with_some_text() -> None:
    spans = rag_trace()
    _fail(spans[0], "", "", "upstream returned 503")
    assert body_of(spans)["error"] == {"type": "provider_error", "stage": "generation", "retryable": True}


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (
            ("openai.BadRequestError", "This model's maximum context length is 128000 tokens"),
            "context_length",
        ),
        (
            ("anthropic.BadRequestError", "prompt is too long: 210000 tokens > 200000 maximum"),
            "context_length",
        ),
        (
            (
                "BadRequestError",
                "The response was filtered due to the prompt triggering Azure's content management policy (content_filter)",
            ),
            "content_filter",
        ),
        (("google.api_core.exceptions.ResourceExhausted", "Quota exceeded for aiplatform"), "rate_limit"),
        (("anthropic.InternalServerError", "Overloaded"), "provider_error"),
        (("httpx.ReadTimeout", ""), "timeout"),
        (("grpc.StatusCode.DEADLINE_EXCEEDED", ""), "timeout"),
        (("", "HTTP 502 from upstream"), "provider_error"),
        (("ValueError", "could not parse the tool arguments"), "other"),
        (("ValueError", "Ошибка: ünïcödé"), "other"),
    ],
)
def test_error_types_from_the_words_providers_use(texts: tuple[str, str], expected: str) -> None:
    assert error_type(*texts) == expected


def test_a_hostile_message_is_read_only_up_to_its_bound() -> None:
    spans = rag_trace()
    _no_answer(spans)
    _fail(spans[0], "X" * 100_000, "y" * 1_000_000 + " rate limit")  # the words past the bound are not read
    assert body_of(spans)["error"]["type"] == "other"


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ({"llm.finish_reason": "length"}, "length"),
        ({"ragmon.finish_reason": "stop"}, "stop"),
        ({"llm.finish_reason": "MAX_TOKENS"}, "length"),
        ({"llm.finish_reason": "end_turn"}, "stop"),
        ({"llm.finish_reason": "tool_use"}, "tool_calls"),
        ({"llm.finish_reason": "SAFETY"}, "content_filter"),
        ({"llm.finish_reason": "something_new"}, "other"),
        (
            {
                "output.mime_type": "application/json",
                "output.value": json.dumps({"choices": [{"finish_reason": "length", "message": {}}]}),
            },
            "length",
        ),
        (
            {
                "output.mime_type": "application/json",
                "output.value": json.dumps({"stop_reason": "max_tokens"}),
            },
            "length",
        ),
        ({}, None),
    ],
)
def test_finish_reasons_of_the_instrumentations(attrs: dict[str, object], expected: str | None) -> None:
    spans = rag_trace()
    llm = _kind(spans, "LLM")
    for key, value in attrs.items():
        _set(llm, key, value)
    assert body_of(spans)["answer"].get("finish_reason") == expected


def test_the_genai_finish_reasons_array() -> None:
    spans = rag_trace()
    llm = _kind(spans, "LLM")
    item = llm.attributes.add(key="gen_ai.response.finish_reasons")
    item.value.array_value.values.add(string_value="length")
    assert body_of(spans)["answer"]["finish_reason"] == "length"
