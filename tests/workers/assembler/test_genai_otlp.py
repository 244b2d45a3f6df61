"""Real instrumentations from PyPI (pinned in pyproject's dev extra), each in an app process of its own
(genai_app.py), their spans exported over OTLP/HTTP to a running API and assembled into a trace event: the
official `openai` client instrumented by `opentelemetry-instrumentation-openai-v2` (`gen_ai.*`) against a local
server answering Chat Completions and Embeddings with fixed replies, and the LangChain chain of test_langchain.py
instrumented by Traceloop's `opentelemetry-instrumentation-langchain` (`gen_ai.*`) and by OpenInference's; one
parametrised test holds the three to the same trace fields, for every field each of them emits. openai-v2 with
its messages sent as log events (POST /v1/logs, early or late) gives the trace of its attribute mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.api.redaction import Pseudonymizer
from tests.service.api.api_events import ACME_KEY
from tests.service.api.api_harness import PSEUDONYM_KEY, KafkaReader, RunningApi
from tests.workers.assembler.genai_app import QUESTION
from tests.workers.assembler.oi_spans import store_records
from workers.assembler.__main__ import build_store
from workers.assembler.assembler import Assembler
from workers.assembler.config import AssemblerConfig
from workers.assembler.documents import content_id
from workers.assembler.metrics import AssemblerMetrics
from workers.assembler.processor import AssemblerProcessor
from workers.assembler.view import attribute_map
from workers.runtime.decode import Undecodable, decode_record
from workers.runtime.emitter import KafkaEmitter
from workers.runtime.records import decode_spans_record
from workers.runtime.types import Event

ROOT = Path(__file__).resolve().parents[3]
ANSWER = "Hold the pin button for ten seconds."
CHAT_REPLY = {
    "id": "chatcmpl-test",
    "object": "chat.completion",
    "created": 1_765_000_000,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": ANSWER},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ],
    "usage": {
        "prompt_tokens": 50,
        "completion_tokens": 6,
        "total_tokens": 56,
        "prompt_tokens_details": {"cached_tokens": 20},
        "completion_tokens_details": {"reasoning_tokens": 2},
    },
}
EMBEDDING_REPLY = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}],
    "model": "text-embedding-3-small",
    "usage": {"prompt_tokens": 7, "total_tokens": 7},
}


class _FixedModel(BaseHTTPRequestHandler):
    """The model's side of the OpenAI API: fixed replies (the client and the instrumentation are real)."""

    replies = {"/v1/chat/completions": CHAT_REPLY, "/v1/embeddings": EMBEDDING_REPLY}

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        reply = self.replies.get(self.path)
        body = json.dumps(reply or {"error": {"message": "no such route"}}).encode()
        self.send_response(200 if reply else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def model_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FixedModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def _run_app(mode: str, api: RunningApi, model_url: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.workers.assembler.genai_app", mode, api.url, ACME_KEY, model_url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout.strip()


def _assemble(
    api: RunningApi, client: redis.Redis, feed: Callable[[Assembler, KafkaReader], None] | None = None
) -> tuple[list[Any], CollectorRegistry]:
    """One assembler fed what the API produced (by `feed`; the spans topic's records by default), one tick."""
    kafka = KafkaReader(api.settings.kafka_bootstrap_servers)
    config = AssemblerConfig(quiet_period_s=0)
    registry = CollectorRegistry()
    emitter = KafkaEmitter(api.settings, client_id="test-assembler")
    try:
        assembler = Assembler(
            config, build_store(client, config), emitter, api.topics, AssemblerMetrics(registry)
        )
        if feed is None:
            store_records(assembler, kafka.records(api.topics.spans))
        else:
            feed(assembler, kafka)
        assert assembler.tick() == 1
    finally:
        emitter.close()
    return [decode_record(r, "trace") for r in kafka.records(api.topics.traces)], registry


@pytest.mark.slow
def test_openai_v2_chat_and_embeddings_become_a_trace_event(
    api: RunningApi, model_url: str, redis_client: redis.Redis
) -> None:
    assert _run_app("openai-v2", api, model_url) == ANSWER
    [event], registry = _assemble(api, redis_client)
    assert isinstance(event, Event), event  # decoded and validated exactly like a native event
    body = event.body
    assert body.query.text == QUESTION  # the chat's last user message: no retrieval span in openai-v2
    assert body.query.embedding is None  # the conventions carry no vectors
    assert body.answer.text == ANSWER and body.answer.finish_reason == "stop"
    assert body.retrieval.documents == []
    assert body.usage.model == "gpt-4o-mini-2024-07-18"
    # openai-v2 2.4b0 writes input and output tokens only, not the reply's cached and reasoning details
    # (tests/workers/assembler/test_genai.py holds the cached and reasoning attributes to their kinds)
    assert body.usage.tokens == {"prompt": 50, "completion": 6, "embedding": 7}
    assert body.usage.cost_usd is None  # priced by the metrics worker
    assert set(body.timings) == {"embedding", "generation", "total"}
    assert body.timings["total"] >= body.timings["generation"] > 0
    assert body.release == "2026.12.1" and body.intent == "billing"
    assert body.session_id == Pseudonymizer(PSEUDONYM_KEY.encode()).identifier("acme", "sess-7")
    assert body.error is None
    assert registry.get_sample_value("ragmon_assembler_trace_spans_total", {"kind": "llm"}) == 1
    assert registry.get_sample_value("ragmon_assembler_trace_spans_total", {"kind": "embedding"}) == 1
    # every gen_ai.* attribute the pinned instrumentation writes is one ragmon knows
    assert (
        registry.get_sample_value("ragmon_assembler_unknown_attributes_total", {"convention": "gen_ai"})
        is None
    )


LANGCHAIN_DOCUMENTS = {
    "kb-1": "Reset the router with the pin button.",
    content_id("The warranty lasts two years."): "The warranty lasts two years.",
}
SAME = {"query": QUESTION, "answer": ANSWER, "release": "2026.12.1", "error": None}
# Per instrumentation, every field it emits; where one emits nothing, the field says so (None, empty).
EXPECTED: dict[str, dict[str, Any]] = {
    "openinference-langchain": {
        **SAME,
        "documents": LANGCHAIN_DOCUMENTS,
        "model": "fake-gpt",
        "tokens": {"prompt": 50, "completion": 6, "cached_prompt": 20},
        "stages": {"retrieval", "generation", "total"},
        "finish_reason": None,
    },
    "traceloop-langchain": {
        **SAME,
        "documents": LANGCHAIN_DOCUMENTS,
        "model": "fake-gpt",
        "tokens": {"prompt": 50, "completion": 6, "cached_prompt": 20},
        "stages": {"retrieval", "generation", "total"},
        "finish_reason": None,  # an empty finish reason for the fake model
    },
    "openai-v2": {  # no retrieval span; a real provider's finish reason; the embedding call's tokens
        **SAME,
        "documents": {},
        "model": "gpt-4o-mini-2024-07-18",
        "tokens": {"prompt": 50, "completion": 6, "embedding": 7},
        "stages": {"embedding", "generation", "total"},
        "finish_reason": "stop",
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_each_instrumentation_gives_the_same_trace_fields(
    mode: str, api: RunningApi, model_url: str, redis_client: redis.Redis
) -> None:
    assert _run_app(mode, api, model_url) == ANSWER
    [event], registry = _assemble(api, redis_client)
    assert isinstance(event, Event), event  # decoded and validated exactly like a native event
    body = event.body
    assert _trace_fields(body) == EXPECTED[mode]
    assert body.timings["total"] >= body.timings["generation"] > 0
    _check_kinds(mode, registry)


def _check_kinds(mode: str, registry: CollectorRegistry) -> None:
    kinds = {"retriever": 0 if mode == "openai-v2" else 1, "llm": 1}
    for kind, n in kinds.items():
        assert (registry.get_sample_value("ragmon_assembler_trace_spans_total", {"kind": kind}) or 0) == n
    # every gen_ai.* attribute the pinned GenAI instrumentations write is one ragmon knows
    unknown = registry.get_sample_value("ragmon_assembler_unknown_attributes_total", {"convention": "gen_ai"})
    assert unknown is None


def _trace_fields(body: Any) -> dict[str, Any]:
    return {
        "query": body.query.text,
        "answer": body.answer.text,
        "release": body.release,
        "error": body.error,
        "documents": {d.id: d.text for d in body.retrieval.documents},
        "model": body.usage.model,
        "tokens": body.usage.tokens,
        "stages": set(body.timings) - {"ttft"},
        "finish_reason": body.answer.finish_reason,
    }


def _in_arrival_order(api: RunningApi) -> Callable[[Assembler, KafkaReader], None]:
    """The spans and log records handed to the assembler's processor in the order the API produced them (its
    records' timestamps), across both topics, a record at a time: as a consumer would see them."""

    def feed(assembler: Assembler, kafka: KafkaReader) -> None:
        processor = AssemblerProcessor(assembler, api.topics.spans, api.topics.logs)
        decoders = {sub.topic: sub.decode for sub in processor.subscriptions}
        records = kafka.records(api.topics.spans) + kafka.records(api.topics.logs)
        assert {r.topic for r in records} == {api.topics.spans, api.topics.logs}
        for record in sorted(records, key=lambda r: r.timestamp):
            event = decoders[record.topic](record)
            assert not isinstance(event, Undecodable), event
            processor.process([event])

    return feed


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["openai-v2-logs", "openai-v2-logs-batched"])
def test_openai_v2_messages_as_log_events_give_the_attribute_mode_trace(
    mode: str, api: RunningApi, model_url: str, redis_client: redis.Redis
) -> None:
    assert _run_app(mode, api, model_url) == ANSWER
    kafka = KafkaReader(api.settings.kafka_bootstrap_servers)
    spans = [decode_spans_record(r) for r in kafka.records(api.topics.spans)]
    for event in spans:  # the messages are not on the spans: only the log events carry them
        assert not isinstance(event, Undecodable)
        for _, _, span in event.body.spans():
            assert (
                not {"gen_ai.input.messages", "gen_ai.output.messages"}
                & attribute_map(span.attributes).keys()
            )
    logs = kafka.records(api.topics.logs)
    assert len(logs) == 1  # one gen_ai.client.inference.operation.details event, for the chat call
    log_at, last_span_at = logs[0].timestamp, max(r.timestamp for r in kafka.records(api.topics.spans))
    assert (log_at > last_span_at) == (mode == "openai-v2-logs-batched")  # late, or early
    [event], registry = _assemble(api, redis_client, _in_arrival_order(api))
    assert isinstance(event, Event), event
    assert _trace_fields(event.body) == EXPECTED["openai-v2"]
    assert event.body.session_id == Pseudonymizer(PSEUDONYM_KEY.encode()).identifier("acme", "sess-7")
    assert event.body.timings["total"] >= event.body.timings["generation"] > 0
    assert registry.get_sample_value("ragmon_assembler_log_records_total", {"outcome": "stored"}) == 1
    assert registry.get_sample_value("ragmon_assembler_log_records_total", {"outcome": "joined"}) == 1
    for outcome in ("no_span", "unread", "late", "no_trace", "overflow"):
        assert registry.get_sample_value("ragmon_assembler_log_records_total", {"outcome": outcome}) is None
    _check_kinds("openai-v2", registry)
