"""Log records of POST /v1/logs joined to their spans (pure but for the record decoder; docs/otlp.md, "The receiver: `POST /v1/logs`").

GenAI instrumentations that do not put the messages on the span send them as log events correlated by
trace and span id. opentelemetry-instrumentation-openai-v2 2.4b0 sends, by its settings:
- on the v1.30 conventions (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, no
  OTEL_SEMCONV_STABILITY_OPT_IN): one event per input message, `gen_ai.system.message`,
  `gen_ai.user.message`, `gen_ai.assistant.message`, `gen_ai.tool.message` (body `{content, ...}`), and one
  `gen_ai.choice` per choice (body `{index, finish_reason, message: {role, content}}`);
- on the latest conventions with content `event_only` or `span_and_event`: one
  `gen_ai.client.inference.operation.details` event whose attributes hold `gen_ai.input.messages` and
  `gen_ai.output.messages` (structured values, the span attributes' JSON shape).
The event's name is the record's `event_name`, or its `event.name` attribute (older SDKs).

`join(views, payloads)` folds each span's events into the messages the GenAI reader reads
(`gen_ai.input.messages` / `gen_ai.output.messages`, workers/assembler/genai.py): the span's own
attributes win; the events only fill in what the span lacks, so a trace reads the same whichever way
its instrumentation sent the messages.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from service.contracts.logs import LOGS_EVENT_TYPE, LogsRecord, decode_logs_record
from workers.assembler.store import LogEntry
from workers.assembler.view import SpanView, any_value, attribute_map
from workers.runtime.decode import Undecodable
from workers.runtime.records import decode_otlp_record
from workers.runtime.types import Event

INPUT_KEY, OUTPUT_KEY = "gen_ai.input.messages", "gen_ai.output.messages"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
CHOICE_EVENT = "gen_ai.choice"
# v1.30's input message events -> the message's role.
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
READ_EVENTS = frozenset({DETAILS_EVENT, CHOICE_EVENT, *MESSAGE_EVENTS})


def decode_logs_subscription(record: Any) -> Event | Undecodable:
    """A logs-topic record (service/contracts/logs.py): body is the decoded LogsRecord; a record that is not
    one is dead-lettered by the runtime (`invalid_spans`: not a record of raw OTLP telemetry)."""
    return decode_otlp_record(record, decode_logs_record, LOGS_EVENT_TYPE)


def log_entries(record: LogsRecord) -> tuple[str, str, list[LogEntry]]:
    """(tenant, trace id, entries) of one logs record; each entry's digest makes a resent one a duplicate."""
    entries = []
    for _, _, log in record.log_records():
        payload = log.SerializeToString(deterministic=True)
        entries.append(LogEntry(hashlib.sha1(payload).hexdigest(), payload))
    return record.tenant, record.trace_id, entries


class Joined(NamedTuple):
    joined: int  # records whose span is in the trace and whose event ragmon reads
    no_span: int  # records naming a span the trace does not have
    unread: int  # records of an event ragmon does not read (kept out of the trace, counted)


def event_name(log: LogRecord) -> str:
    if log.event_name:
        return log.event_name
    for kv in log.attributes:
        if kv.key == "event.name":
            return kv.value.string_value
    return ""


def join(views: Sequence[SpanView], payloads: Sequence[bytes]) -> Joined:
    """Fold the log records into their spans' messages (in place: the views' attrs); counts by outcome."""
    by_span: dict[str, list[LogRecord]] = {}
    unread = 0
    for payload in payloads:
        log = LogRecord.FromString(payload)
        if event_name(log) not in READ_EVENTS:
            unread += 1
            continue
        by_span.setdefault(log.span_id.hex(), []).append(log)
    joined = 0
    for view in views:
        logs = by_span.pop(view.span_id, None)
        if logs:
            fold(view, logs)
            joined += len(logs)
    return Joined(joined, sum(len(logs) for logs in by_span.values()), unread)


def _text(content: Any) -> str:
    """A message's content: text, or a list of parts (OpenAI's `{type: text, text}`, GenAI's `{type, content}`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            t
            for p in content
            if isinstance(p, dict) and p.get("type", "text") == "text"
            for t in (p.get("text"), p.get("content"))
            if isinstance(t, str)
        )
    return ""


def _messages(value: Any) -> Any:
    return value if isinstance(value, list | str) and value else None


def fold(view: SpanView, logs: list[LogRecord]) -> None:
    """One span's events -> its input and output messages, where its attributes carry none."""
    inputs: list[dict[str, Any]] = []
    choices: list[tuple[int, dict[str, Any]]] = []
    details_in: Any = None
    details_out: Any = None
    for log in sorted(logs, key=lambda r: r.time_unix_nano or r.observed_time_unix_nano):
        name = event_name(log)
        if name == DETAILS_EVENT:
            attrs = attribute_map(log.attributes)
            details_in = _messages(attrs.get(INPUT_KEY)) or details_in
            details_out = _messages(attrs.get(OUTPUT_KEY)) or details_out
            continue
        body = any_value(log.body) if log.HasField("body") else None
        body = body if isinstance(body, dict) else {}
        if name == CHOICE_EVENT:
            message = body.get("message")
            message = message if isinstance(message, dict) else {}
            out = {"role": message.get("role") or "assistant", "content": _text(message.get("content"))}
            if isinstance(body.get("finish_reason"), str):
                out["finish_reason"] = body["finish_reason"]
            index = body.get("index")
            choices.append((index if isinstance(index, int) else len(choices), out))
        else:
            role = body.get("role") if isinstance(body.get("role"), str) else MESSAGE_EVENTS[name]
            inputs.append({"role": role, "content": _text(body.get("content"))})
    if INPUT_KEY not in view.attrs and (details_in or inputs):
        view.attrs[INPUT_KEY] = details_in or inputs
    if OUTPUT_KEY not in view.attrs and (details_out or choices):
        view.attrs[OUTPUT_KEY] = details_out or [m for _, m in sorted(choices, key=lambda c: c[0])]
