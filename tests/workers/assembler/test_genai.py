"""The GenAI (`gen_ai.*`) reader, row by row of docs/otlp.md's "Conventions read" table (pure, hand-written spans)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from service.contracts import TraceBody
from tests.workers.assembler.oi_spans import MS, bare_span
from workers.assembler.documents import content_id
from workers.assembler.mapping import Assembled, TraceSpans, assemble
from workers.assembler.readers import read
from workers.assembler.view import SpanView

QUESTION = "How do I reset my router?"
ANSWER = "Hold the reset button for ten seconds."


def _set(value: AnyValue, raw: Any) -> None:
    if isinstance(raw, bool):
        value.bool_value = raw
    elif isinstance(raw, int):
        value.int_value = raw
    elif isinstance(raw, float):
        value.double_value = raw
    elif isinstance(raw, list):
        for item in raw:
            _set(value.array_value.values.add(), item)
    elif isinstance(raw, dict):
        for key, item in raw.items():
            entry = value.kvlist_value.values.add(key=key)
            _set(entry.value, item)
    else:
        value.string_value = raw


def genai_span(
    trace_id: bytes,
    name: str,
    start_ns: int,
    duration_ms: float,
    parent: bytes = b"",
    attrs: dict[str, Any] | None = None,
    failed: bool = False,
) -> Span:
    span = bare_span(trace_id, name, start_ns, duration_ms, parent)
    for key, value in (attrs or {}).items():
        _set(span.attributes.add(key=key).value, value)
    if failed:
        span.status.code = Status.STATUS_CODE_ERROR
    return span


def messages(*pairs: tuple[str, str], finish: str | None = None) -> str:
    out: list[dict[str, Any]] = [{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in pairs]
    if finish is not None:
        out[-1]["finish_reason"] = finish
    return json.dumps(out)


def chat_attrs(**extra: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.input.messages": messages(("system", "Answer from the context."), ("user", QUESTION)),
        "gen_ai.output.messages": messages(("assistant", ANSWER), finish="stop"),
        **extra,
    }


def genai_trace(chat: dict[str, Any] | None = None, retrieval: dict[str, Any] | None = None) -> list[Span]:
    """root (plain OTel, 0-500 ms) > embeddings (10-30), retrieval (30-80), chat (100-480)."""
    tid = os.urandom(16)
    t0 = time.time_ns() - 2_000 * MS
    root = genai_span(tid, "rag", t0, 500, attrs={"session.id": "sess-42", "ragmon.intent": "billing"})
    rid = root.span_id
    docs = [
        {
            "id": "kb-1",
            "score": 0.91,
            "content": "Routers reset with the pin button.",
            "metadata": {"lang": "en"},
        },
        {"id": "kb-2", "score": 0.5, "content": "Warranty terms."},
    ]
    return [
        root,
        genai_span(
            tid,
            "embeddings text-embedding-3-small",
            t0 + 10 * MS,
            20,
            rid,
            {
                "gen_ai.operation.name": "embeddings",
                "gen_ai.request.model": "text-embedding-3-small",
                "gen_ai.usage.input_tokens": 7,
            },
        ),
        genai_span(
            tid,
            "retrieval kb",
            t0 + 30 * MS,
            50,
            rid,
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.data_source.id": "kb",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": json.dumps(docs),
                **(retrieval or {}),
            },
        ),
        genai_span(
            tid, "chat gpt-4o-mini", t0 + 100 * MS, 380, rid, chat if chat is not None else chat_attrs()
        ),
    ]


def run(spans: list[Span]) -> Assembled:
    return assemble(TraceSpans(spans[0].trace_id.hex(), [SpanView.of(s) for s in spans], {}))


def body_of(spans: list[Span]) -> dict[str, Any]:
    result = run(spans)
    assert result.body is not None, (result.drop_reason, result.detail)
    TraceBody.model_validate(result.body)
    return result.body


def test_a_genai_rag_trace_maps_to_every_field() -> None:
    spans = genai_trace()
    body = body_of(spans)
    assert body["trace_id"] == spans[0].trace_id.hex()
    assert body["query"] == {"text": QUESTION}  # the conventions carry no vectors
    assert body["answer"] == {"text": ANSWER, "finish_reason": "stop"}
    assert body["intent"] == "billing" and body["session_id"] == "sess-42"
    docs = body["retrieval"]["documents"]
    assert [(d["id"], d["text"], d["score"]) for d in docs] == [
        ("kb-1", "Routers reset with the pin button.", 0.91),
        ("kb-2", "Warranty terms.", 0.5),
    ]
    assert docs[0]["metadata"] == {"lang": "en", "data_source_id": "kb"}
    assert docs[1]["metadata"] == {"data_source_id": "kb"}
    assert body["usage"] == {
        "model": "gpt-4o-mini-2024-07-18",
        "tokens": {"prompt": 120, "completion": 30, "embedding": 7},
    }
    assert body["timings"] == {"embedding": 20.0, "retrieval": 50.0, "generation": 380.0, "total": 500.0}
    assert "error" not in body
    result = run(spans)
    assert result.counts == {"none": 1, "EMBEDDING": 1, "RETRIEVER": 1, "LLM": 1}
    assert result.unknown == {}


@pytest.mark.parametrize(
    ("operation", "kind"),
    [
        ("chat", "LLM"),
        ("text_completion", "LLM"),
        ("generate_content", "LLM"),
        ("embeddings", "EMBEDDING"),
        ("retrieval", "RETRIEVER"),
        ("execute_tool", "TOOL"),
        ("invoke_agent", "AGENT"),
        ("create_agent", "AGENT"),
        ("invoke_workflow", "CHAIN"),
        ("a_future_operation", "UNKNOWN"),
    ],
)
def test_each_operation_is_a_neutral_kind(operation: str, kind: str) -> None:
    span = genai_span(os.urandom(16), "s", 1, 1, attrs={"gen_ai.operation.name": operation})
    assert read(SpanView.of(span)).kind == kind


def test_a_tool_span_is_timed_as_the_tool_stage() -> None:
    spans = genai_trace()
    tool = genai_span(
        spans[0].trace_id,
        "execute_tool search",
        spans[0].start_time_unix_nano + 82 * MS,
        10,
        spans[0].span_id,
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
    )
    assert body_of([*spans, tool])["timings"]["tool"] == 10.0


def test_request_model_when_no_response_model() -> None:
    chat = chat_attrs()
    del chat["gen_ai.response.model"]
    assert body_of(genai_trace(chat))["usage"]["model"] == "gpt-4o-mini"


def test_cached_and_reasoning_tokens_apart() -> None:
    chat = chat_attrs(
        **{"gen_ai.usage.cache_read.input_tokens": 100, "gen_ai.usage.reasoning.output_tokens": 12}
    )
    tokens = body_of(genai_trace(chat))["usage"]["tokens"]
    assert tokens == {"prompt": 120, "completion": 30, "cached_prompt": 100, "reasoning": 12, "embedding": 7}


def test_older_token_names_are_read() -> None:
    chat = chat_attrs()
    del chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]
    chat.update({"gen_ai.usage.prompt_tokens": 11, "gen_ai.usage.completion_tokens": 5})
    chat["gen_ai.usage.cache_read_input_tokens"] = 4  # Traceloop's
    tokens = body_of(genai_trace(chat))["usage"]["tokens"]
    assert tokens == {"prompt": 11, "completion": 5, "cached_prompt": 4, "embedding": 7}


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        (["length"], "length"),
        (["content_filter"], "content_filter"),
        (["tool_calls"], "tool_calls"),
        (["x"], "other"),
    ],
)
def test_finish_reasons_map_onto_the_contract(reasons: list[str], expected: str) -> None:
    chat = chat_attrs(**{"gen_ai.response.finish_reasons": reasons})
    assert body_of(genai_trace(chat))["answer"]["finish_reason"] == expected


def test_finish_reason_of_the_output_message_without_the_array() -> None:
    chat = chat_attrs(**{"gen_ai.output.messages": messages(("assistant", ANSWER), finish="length")})
    del chat["gen_ai.response.finish_reasons"]
    assert body_of(genai_trace(chat))["answer"]["finish_reason"] == "length"


def test_the_question_is_the_last_user_message_without_root_input_or_retrieval() -> None:
    spans = genai_trace(
        chat_attrs(
            **{"gen_ai.input.messages": messages(("user", "earlier"), ("assistant", "a"), ("user", QUESTION))}
        )
    )
    spans = [s for s in spans if s.name != "retrieval kb"]
    assert body_of(spans)["query"]["text"] == QUESTION


def test_a_lone_chat_span_is_a_trace() -> None:
    """openai-v2 alone: the chat span is the root (no retrieval span)."""
    chat = genai_span(
        os.urandom(16), "chat gpt-4o-mini", time.time_ns() - 2_000 * MS, 300, attrs=chat_attrs()
    )
    body = body_of([chat])
    assert body["query"]["text"] == QUESTION and body["answer"]["text"] == ANSWER
    assert body["retrieval"]["documents"] == []
    assert body["timings"] == {"generation": 300.0, "total": 300.0}


def test_traceloop_indexed_messages_are_read() -> None:
    chat = chat_attrs()
    del chat["gen_ai.input.messages"], chat["gen_ai.output.messages"], chat["gen_ai.response.finish_reasons"]
    chat.update(
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": QUESTION,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": ANSWER,
            "gen_ai.completion.0.finish_reason": "stop",
        }
    )
    spans = [s for s in genai_trace(chat) if s.name != "retrieval kb"]
    body = body_of(spans)
    assert body["query"]["text"] == QUESTION
    assert body["answer"] == {"text": ANSWER, "finish_reason": "stop"}
    assert run(spans).unknown == {}


def test_documents_as_an_array_of_maps_and_without_text() -> None:
    """A document with no text (ids and scores only, the conventions' default) is kept, its text empty."""
    spans = genai_trace(
        retrieval={"gen_ai.retrieval.documents": [{"id": "kb-9", "score": 0.3}, {"score": 0.1}]}
    )
    docs = body_of(spans)["retrieval"]["documents"]
    assert [(d["id"], d["text"], d["score"]) for d in docs] == [("kb-9", "", 0.3), (content_id(""), "", 0.1)]


def test_a_document_id_from_its_metadata_or_its_content() -> None:
    docs = [{"content": "A.", "metadata": {"doc_id": "m-1"}}, {"content": "B."}]
    spans = genai_trace(retrieval={"gen_ai.retrieval.documents": json.dumps(docs)})
    assert [d["id"] for d in body_of(spans)["retrieval"]["documents"]] == ["m-1", content_id("B.")]


def test_a_failed_chat_is_the_traces_error_by_error_type() -> None:
    chat = chat_attrs(**{"error.type": "openai.RateLimitError"})
    del chat["gen_ai.output.messages"]
    spans = genai_trace(chat)
    spans[-1].status.code = Status.STATUS_CODE_ERROR
    body = body_of(spans)
    assert body["error"] == {"type": "rate_limit", "stage": "generation", "retryable": True}


def test_error_type_alone_marks_the_span_failed() -> None:
    chat = chat_attrs(**{"error.type": "timeout"})
    del chat["gen_ai.output.messages"]
    assert body_of(genai_trace(chat))["error"] == {
        "type": "timeout",
        "stage": "generation",
        "retryable": True,
    }


def test_a_failed_retrieval_under_an_answer_is_no_error() -> None:
    spans = genai_trace(retrieval={"error.type": "500"})
    assert "error" not in body_of(spans)


def test_time_to_first_chunk_is_the_ttft() -> None:
    chat = chat_attrs(**{"gen_ai.response.time_to_first_chunk": 0.05})
    assert body_of(genai_trace(chat))["timings"]["ttft"] == 150.0  # the chat starts at 100 ms


def test_unknown_genai_attributes_are_counted_never_fatal() -> None:
    chat = chat_attrs(**{"gen_ai.usage.audio.input_tokens": 3, "gen_ai.brand_new.thing": "x"})
    spans = genai_trace(chat)
    result = run(spans)
    assert result.body is not None
    assert result.unknown == {"gen_ai": 2}
    assert result.body["usage"]["tokens"]["prompt"] == 120


def test_known_but_unmapped_attributes_are_not_counted() -> None:
    chat = chat_attrs(
        **{"gen_ai.request.temperature": 0.2, "gen_ai.response.id": "r-1", "gen_ai.conversation.id": "c"}
    )
    assert run(genai_trace(chat)).unknown == {}


def test_both_conventions_on_one_span_openinference_wins_field_by_field() -> None:
    chat = chat_attrs(
        **{
            "openinference.span.kind": "LLM",
            "llm.model_name": "oi-model",
            "llm.token_count.prompt": 999,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "the OpenInference answer",
        }
    )
    body = body_of(genai_trace(chat))
    assert body["usage"]["model"] == "oi-model"
    assert body["answer"]["text"] == "the OpenInference answer"
    # OpenInference said nothing of the completion tokens: the GenAI reader fills them in.
    assert body["usage"]["tokens"] == {"prompt": 999, "completion": 30, "embedding": 7}
    assert body["answer"]["finish_reason"] == "stop"


def test_the_kind_of_a_span_with_both_is_openinferences() -> None:
    span = genai_span(
        os.urandom(16), "s", 1, 1, attrs={"openinference.span.kind": "CHAIN", "gen_ai.operation.name": "chat"}
    )
    neutral = read(SpanView.of(span))
    assert neutral.kind == "CHAIN"
    assert [r.name for r in neutral.readers] == ["openinference", "gen_ai"]


def test_unknown_attributes_of_an_openinference_only_span_are_not_read() -> None:
    span = genai_span(
        os.urandom(16), "s", 1, 1, attrs={"openinference.span.kind": "LLM", "gen_ai.whatever": 1}
    )
    assert read(SpanView.of(span)).unknown_attributes() == {}


def test_a_trace_of_plain_spans_is_still_not_openinference() -> None:
    span = genai_span(os.urandom(16), "s", 1, 1, attrs={"gen_ai.request.model": "m"})  # no operation
    result = run([span])
    assert result.drop_reason == "not_openinference"


def test_traceloop_task_input_output_and_retriever_documents() -> None:
    """What Traceloop's LangChain instrumentation writes: its steps' input and output as JSON task attributes."""
    tid = os.urandom(16)
    t0 = time.time_ns() - 2_000 * MS
    root = genai_span(
        tid,
        "RunnableSequence.workflow",
        t0,
        500,
        attrs={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.task.input": json.dumps({"inputs": QUESTION, "tags": []}),
            "gen_ai.task.output": json.dumps({"outputs": ANSWER}),
        },
    )
    documents = {
        "documents": [{"page_content": "Reset with the pin.", "metadata": {"id": "kb-1"}}],
        "count": 1,
    }
    retriever = genai_span(
        tid,
        "VectorStoreRetriever",
        t0 + 10 * MS,
        20,
        root.span_id,
        {
            "gen_ai.operation.name": "vector_db_retrieve",
            "gen_ai.task.input": json.dumps({"query": QUESTION}),
            "gen_ai.task.output": json.dumps(documents),
        },
    )
    chat = genai_span(
        tid,
        "FakeChatModel.chat",
        t0 + 40 * MS,
        400,
        root.span_id,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "unknown",
            "gen_ai.response.model": "unknown",
            "traceloop.association.properties.ls_model_name": "fake-gpt",
            "gen_ai.usage.input_tokens": 50,
            "gen_ai.usage.output_tokens": 6,
            "gen_ai.usage.total_tokens": 56,
            "gen_ai.output.messages": messages(("assistant", "the model's words"), finish=""),
        },
    )
    spans = [root, retriever, chat]
    body = body_of(spans)
    assert (
        body["query"]["text"] == QUESTION and body["answer"]["text"] == ANSWER
    )  # the root's task input/output
    assert [(d["id"], d["text"]) for d in body["retrieval"]["documents"]] == [("kb-1", "Reset with the pin.")]
    assert body["usage"]["model"] == "fake-gpt"  # "unknown" is no model name
    assert "finish_reason" not in body["answer"]  # an empty finish reason is none
    assert body["timings"]["retrieval"] == 20.0
    assert run(spans).unknown == {}
    assert read(SpanView.of(retriever)).input_text == QUESTION


def test_spans_of_both_conventions_make_one_trace() -> None:
    """An OpenInference retriever beside a GenAI chat call: one trace event, each span read by its reader."""
    spans = [s for s in genai_trace() if s.name != "retrieval kb"]
    root = spans[0]
    retriever = genai_span(
        root.trace_id,
        "retrieve",
        root.start_time_unix_nano + 30 * MS,
        50,
        root.span_id,
        {
            "openinference.span.kind": "RETRIEVER",
            "input.value": QUESTION,
            "retrieval.documents.0.document.id": "kb-7",
            "retrieval.documents.0.document.content": "Reset with the pin.",
        },
    )
    body = body_of([*spans, retriever])
    assert (
        body["query"]["text"] == QUESTION
    )  # the OpenInference retriever's input, before the chat's question
    assert [(d["id"], d["text"]) for d in body["retrieval"]["documents"]] == [("kb-7", "Reset with the pin.")]
    assert body["answer"]["text"] == ANSWER and body["usage"]["model"] == "gpt-4o-mini-2024-07-18"
    assert body["timings"]["retrieval"] == 50.0 and body["timings"]["generation"] == 380.0
