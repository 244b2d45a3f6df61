"""Log records of POST /v1/logs joined to their spans: the fold of each event shape into the messages the GenAI
reader reads (pure), and the assembler's store of them against the session's real broker and Redis: early and
late within the wait, after the trace (late), without their spans (no_trace), duplicates, caps.

The shapes are what opentelemetry-instrumentation-openai-v2 writes: v1.30's per-message events (its utils'
message_to_event / choice_to_event: `gen_ai.<role>.message` with body {content}, `gen_ai.choice` with body
{index, finish_reason, message: {role, content}}) and the latest conventions' one
`gen_ai.client.inference.operation.details` event (the span's message attributes, structured). The pinned
2.4b0 sends the latter (test_genai_otlp.py runs it end to end)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, LogsData
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from service.contracts.logs import decode_logs_record, encode_logs_record
from tests.workers.assembler.oi_spans import rag_trace
from tests.workers.assembler.test_assembler import Rig, rig  # noqa: F401 (the fixture)
from tests.workers.assembler.test_genai import ANSWER, QUESTION, _set, body_of, chat_attrs, genai_trace
from workers.assembler.logs import decode_logs_subscription, fold, join
from workers.assembler.mapping import TraceSpans, assemble
from workers.assembler.readers import read
from workers.assembler.view import SpanView
from workers.runtime.metrics import RuntimeMetrics

MESSAGE_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages")


def event(
    span: Span, name: str, body: Any = None, attrs: dict[str, Any] | None = None, at: int = 0
) -> LogRecord:
    out = LogRecord(trace_id=span.trace_id, span_id=span.span_id, time_unix_nano=at or time.time_ns())
    if name:
        out.event_name = name
    if body is not None:
        _set(out.body, body)
    for key, value in (attrs or {}).items():
        _set(out.attributes.add(key=key).value, value)
    return out


def v130_events(chat: Span, question: str = QUESTION, answer: str = ANSWER) -> list[LogRecord]:
    """What openai-v2 on the v1.30 conventions emits for one chat call with content capture on."""
    t = chat.start_time_unix_nano
    system = {"gen_ai.system": "openai"}
    return [
        event(chat, "gen_ai.system.message", {"content": "Answer from the context."}, system, t + 1),
        event(chat, "gen_ai.user.message", {"content": question}, system, t + 2),
        event(
            chat,
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}},
            system,
            t + 3,
        ),
    ]


def details_event(chat: Span) -> LogRecord:
    """What openai-v2 on the latest conventions emits with content `event_only`: the messages, structured."""
    inputs = json.loads(chat_attrs()["gen_ai.input.messages"])
    outputs = json.loads(chat_attrs()["gen_ai.output.messages"])
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": inputs,
        "gen_ai.output.messages": outputs,
    }
    return event(chat, "gen_ai.client.inference.operation.details", attrs=attrs)


def without_messages() -> list[Span]:
    attrs = {k: v for k, v in chat_attrs().items() if k not in MESSAGE_KEYS}
    return genai_trace(chat=attrs)


def assembled(spans: list[Span], logs: list[LogRecord]) -> dict[str, Any]:
    views = [SpanView.of(s) for s in spans]
    joined = join(views, [log.SerializeToString() for log in logs])
    assert joined.joined == len(logs) and joined.no_span == joined.unread == 0
    return body_of_views(spans, views)


def body_of_views(spans: list[Span], views: list[SpanView]) -> dict[str, Any]:
    result = assemble(TraceSpans(spans[0].trace_id.hex(), views, {}))
    assert result.body is not None, (result.drop_reason, result.detail)
    return result.body


@pytest.mark.parametrize("shape", ["v1.30 events", "operation details"])
def test_messages_as_events_give_the_trace_of_messages_as_attributes(shape: str) -> None:
    spans = without_messages()
    chat = spans[-1]
    logs = v130_events(chat) if shape == "v1.30 events" else [details_event(chat)]
    body = assembled(spans, logs)
    reference = body_of(genai_trace())
    for field in ("query", "answer", "retrieval", "usage"):
        assert body[field] == reference[field], field
    assert body["answer"] == {"text": ANSWER, "finish_reason": "stop"}


def test_the_question_without_retrieval_is_the_last_user_event() -> None:
    spans = without_messages()
    del spans[2]  # no retrieval span: the question is the chat's last user message
    chat = spans[-1]
    logs = v130_events(chat)
    logs.insert(
        1, event(chat, "gen_ai.user.message", {"content": "an earlier turn"}, at=chat.start_time_unix_nano)
    )
    assert assembled(spans, logs)["query"]["text"] == QUESTION


def test_openai_content_parts_and_the_event_name_attribute_of_older_sdks() -> None:
    spans = without_messages()
    chat = spans[-1]
    parts = [
        {"type": "text", "text": "How do I "},
        {"type": "image_url", "image_url": "x"},
        {"type": "text", "text": "reset?"},
    ]
    user = event(chat, "", {"content": parts}, {"event.name": "gen_ai.user.message"})
    view = SpanView.of(chat)
    fold(view, [user])
    assert read(view).question == "How do I reset?"


def test_span_attributes_win_over_events() -> None:
    spans = genai_trace()  # messages on the span already
    chat = spans[-1]
    body = assembled(spans, v130_events(chat, question="other question", answer="other answer"))
    assert body["answer"]["text"] == ANSWER


def test_choices_in_index_order_and_an_assistant_without_a_role() -> None:
    spans = without_messages()
    chat = spans[-1]
    t = chat.start_time_unix_nano
    second = event(
        chat, "gen_ai.choice", {"index": 1, "finish_reason": "length", "message": {"content": "B"}}, at=t + 1
    )
    first = event(
        chat, "gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {"content": "A"}}, at=t + 2
    )
    view = SpanView.of(chat)
    fold(view, [second, first])
    neutral = read(view)
    assert neutral.answers == ["A", "B"] and neutral.finish_reason == "stop"


def test_records_of_other_spans_and_other_events_are_counted_not_joined() -> None:
    spans = without_messages()
    chat = spans[-1]
    stranger = Span(trace_id=chat.trace_id, span_id=os.urandom(8))
    logs = [
        *v130_events(chat),
        event(stranger, "gen_ai.user.message", {"content": "elsewhere"}),
        event(chat, "app.audit", {"content": "not a message"}),
        event(chat, "", "a plain log line"),
    ]
    views = [SpanView.of(s) for s in spans]
    assert tuple(join(views, [log.SerializeToString() for log in logs])) == (3, 1, 2)


def test_hostile_bodies_cost_nothing_and_break_nothing() -> None:
    spans = without_messages()
    chat = spans[-1]
    logs = [
        event(chat, "gen_ai.user.message", "not a map"),
        event(chat, "gen_ai.user.message", {"content": 7, "role": ["x"]}),
        event(chat, "gen_ai.choice", {"index": "first", "message": "nope", "finish_reason": 3}),
        event(chat, "gen_ai.client.inference.operation.details", attrs={"gen_ai.input.messages": 5}),
        event(chat, "gen_ai.choice"),
    ]
    view = SpanView.of(chat)
    fold(view, logs)
    neutral = read(view)
    assert neutral.question is None and neutral.answers == [] and neutral.finish_reason == "stop"


def test_the_logs_record_round_trips_and_refuses_records_outside_a_span() -> None:
    spans = without_messages()
    data = LogsData()
    scope = data.resource_logs.add().scope_logs.add()
    scope.log_records.extend(v130_events(spans[-1]))
    key, value, headers = encode_logs_record("acme", spans[0].trace_id.hex(), data)
    record = decode_logs_record(value, headers)
    assert record.tenant == "acme" and record.trace_id == spans[0].trace_id.hex()
    assert key == f"acme/{record.trace_id}".encode() and len(list(record.log_records())) == 3
    scope.log_records.add(trace_id=spans[0].trace_id)  # no span id
    _, value, headers = encode_logs_record("acme", spans[0].trace_id.hex(), data)
    with pytest.raises(ValueError, match="8-byte span id"):
        decode_logs_record(value, headers)


# -- the assembler's store: real Redis and Kafka ---------------------------------------------------------


def send_logs(rig: Rig, logs: list[LogRecord], tenant: str = "acme") -> None:  # noqa: F811
    data = LogsData()
    data.resource_logs.add().scope_logs.add().log_records.extend(logs)
    key, value, headers = encode_logs_record(tenant, logs[0].trace_id.hex(), data)
    rig.producer.send(rig.topics.logs, key=key, value=value, headers=headers)
    rig.producer.flush()


def consume_logs(rig: Rig) -> None:  # noqa: F811
    events = [decode_logs_subscription(r) for r in rig.kafka.records(rig.topics.logs)]
    rig.assembler.store_logs([e.body for e in events])  # type: ignore[union-attr]


def log_metric(rig: Rig, outcome: str) -> float:  # noqa: F811
    return rig.metric("ragmon_assembler_log_records_total", outcome=outcome)


@pytest.mark.parametrize("order", ["early", "late"])
def test_records_early_or_late_within_the_wait_are_joined(rig: Rig, order: str) -> None:  # noqa: F811
    spans = without_messages()
    if order == "early":
        send_logs(rig, v130_events(spans[-1]))
        consume_logs(rig)
        assert rig.assembler.tick(time.time() + 1) == 0  # a trace of log records only waits for its spans
        rig.send(spans)
        rig.consume_all()
    else:
        rig.send(spans)
        rig.consume_all()
        send_logs(rig, v130_events(spans[-1]))
        consume_logs(rig)
    assert rig.assembler.tick() == 1
    [trace] = rig.trace_events()
    assert trace.body.query.text == QUESTION and trace.body.answer.text == ANSWER
    assert log_metric(rig, "stored") == 3 and log_metric(rig, "joined") == 3
    assert rig.metric("ragmon_assembler_traces_dropped_total", reason="no_root") == 0


def test_replayed_late_and_orphan_records_are_counted_never_fatal(rig: Rig) -> None:  # noqa: F811
    spans = without_messages()
    rig.send(spans)
    rig.consume_all()
    send_logs(rig, v130_events(spans[-1]))
    consume_logs(rig)
    consume_logs(rig)  # a redelivery before assembly: duplicates
    assert log_metric(rig, "duplicate") == 3
    assert rig.assembler.tick() == 1
    consume_logs(rig)  # after the trace was emitted: late
    assert log_metric(rig, "late") == 3
    assert rig.assembler.tick() == 0 and len(rig.trace_events()) == 1
    orphan = Span(trace_id=os.urandom(16), span_id=os.urandom(8))
    send_logs(rig, v130_events(orphan))  # their spans never come
    consume_logs(rig)
    assert rig.assembler.tick(time.time() + 31) == 0  # past root_wait_s
    assert log_metric(rig, "no_trace") == 3
    assert rig.metric("ragmon_assembler_traces_dropped_total", reason="no_root") == 0  # not a trace
    assert rig.metric("ragmon_assembler_pending_traces") == 0


def test_a_trace_holds_at_most_its_cap_of_records(rig: Rig) -> None:  # noqa: F811
    rig.assembler.store.max_logs = 5
    spans = without_messages()
    chat = spans[-1]
    flood = [
        event(chat, "app.debug", {"content": f"line {i}"}, at=chat.start_time_unix_nano - 1000 + i)
        for i in range(40)
    ]
    send_logs(rig, flood)
    send_logs(rig, v130_events(chat))  # after the cap: overflow too, the trace still assembles
    consume_logs(rig)
    rig.send(spans)
    rig.consume_all()
    assert rig.assembler.tick() == 1
    assert log_metric(rig, "stored") == 5 and log_metric(rig, "overflow") == 38
    assert log_metric(rig, "unread") == 5
    [trace] = rig.trace_events()
    assert trace.body.answer.text == ""  # its messages were over the cap: counted, not joined


def test_a_dead_lettered_trace_takes_its_log_records_with_it(rig: Rig) -> None:  # noqa: F811
    """A trace that breaks the contract goes to the dead-letter topic whole: its spans as a spans record and
    the log records stored with it as a logs record, each naming its own topic, so a replay loses neither."""
    spans = rag_trace(root_attrs={"ragmon.retrieval.filters": "[" * 100 + "]" * 100})
    rig.send(spans, tenant="attacker")
    rig.consume_all()
    events = v130_events(spans[-1])
    send_logs(rig, events, tenant="attacker")
    consume_logs(rig)
    rig.assembler.runtime_metrics = RuntimeMetrics(rig.registry, "assembler")
    assert rig.assembler.tick() == 0
    dead = {dict(r.headers)["ragmon-dlq-source-topic"].decode(): r for r in rig.kafka.records(rig.topics.dlq)}
    assert sorted(dead) == sorted([rig.topics.spans, rig.topics.logs])
    for record in dead.values():
        headers = dict(record.headers)
        assert headers["ragmon-dlq-reason"] == b"invalid_body" and b"filters" in headers["ragmon-dlq-detail"]
        assert record.key == f"attacker/{spans[0].trace_id.hex()}".encode()
    logs = dead[rig.topics.logs]
    decoded = decode_logs_record(logs.value, logs.headers)
    assert decoded.tenant == "attacker" and decoded.trace_id == spans[0].trace_id.hex()
    kept = sorted(r.SerializeToString(deterministic=True) for _, _, r in decoded.log_records())
    assert kept == sorted(e.SerializeToString(deterministic=True) for e in events)
    assert rig.metric("ragmon_worker_dead_letters_total", worker="assembler", reason="invalid_body") == 2
    assert rig.assembler.store.pending() == 0
