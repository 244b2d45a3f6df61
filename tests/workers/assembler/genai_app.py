"""An app instrumented with a real instrumentation from PyPI, run in its own process by test_genai_otlp.py.

`python -m tests.workers.assembler.genai_app MODE API_URL KEY MODEL_URL`, and the OTel SDK exports the
spans over OTLP/HTTP to the ragmon API:
- `openai-v2`: the official `openai` client, instrumented by `opentelemetry-instrumentation-openai-v2`,
  calls the test's fixed-reply model server (an embedding of the question, then a chat completion) under
  one plain root span;
- `openai-v2-logs`: the same calls with content `event_only`: the messages leave the spans for one
  `gen_ai.client.inference.operation.details` log event per chat call, sent to /v1/logs by the SDK's OTLP
  log exporter as it is emitted (before its span ends: early). The pinned 2.4b0 with
  opentelemetry-util-genai 1.1b0 always takes the latest conventions' path (util-genai's
  is_experimental_mode() is always true), so v1.30's per-message events (`gen_ai.user.message`,
  `gen_ai.choice`) are not what it sends; workers/assembler/test_logs.py holds those to the same fields;
- `openai-v2-logs-batched`: the same, the events batched and exported at shutdown (after every span: late,
  within the trace's wait);
- `openinference-langchain`: the same chain, instrumented by OpenInference's LangChain instrumentor;
- `traceloop-langchain`: the LangChain RAG chain of tests/workers/assembler/test_langchain.py (a fake chat
  model, an in-memory vector store), instrumented by Traceloop's `opentelemetry-instrumentation-langchain`
  (MODEL_URL unused).
Each instrumentation patches its library globally and reads its settings once per process (and the
OpenInference LangChain instrumentor of the other test patches LangChain too), hence a process of its own.
"""

from __future__ import annotations

import os
import sys

QUESTION = "How do I reset the router?"
CONTEXT = "Reset the router with the pin button."


def _provider(api_url: str, key: str) -> object:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(
        resource=Resource.create({"service.name": "rag-app", "ragmon.release": "2026.12.1"})
    )
    exporter = OTLPSpanExporter(endpoint=f"{api_url}/v1/traces", headers={"Authorization": f"Bearer {key}"})
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _logger_provider(api_url: str, key: str, batch: bool) -> object:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    provider = LoggerProvider(resource=Resource.create({"service.name": "rag-app"}))
    exporter = OTLPLogExporter(endpoint=f"{api_url}/v1/logs", headers={"Authorization": f"Bearer {key}"})
    provider.add_log_record_processor(
        BatchLogRecordProcessor(exporter) if batch else SimpleLogRecordProcessor(exporter)
    )
    return provider


def run_openai_v2(api_url: str, key: str, model_url: str, messages: str = "span") -> None:
    """messages: `span` (on the spans, the conventions' latest form), `logs` (one log event per call, sent as
    emitted) or `logs-batched` (the same events, batched and sent at shutdown)."""
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = (
        "span_only" if messages == "span" else "event_only"
    )
    from openai import OpenAI
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.trace import TracerProvider

    provider = _provider(api_url, key)
    assert isinstance(provider, TracerProvider)
    logs = _logger_provider(api_url, key, batch=messages == "logs-batched") if messages != "span" else None
    assert logs is None or isinstance(logs, LoggerProvider)
    OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logs)
    client = OpenAI(base_url=f"{model_url}/v1", api_key="test-key", max_retries=0)
    tracer = provider.get_tracer("rag-app")
    with tracer.start_as_current_span("rag", attributes={"ragmon.intent": "billing", "session.id": "sess-7"}):
        client.embeddings.create(model="text-embedding-3-small", input=QUESTION)
        reply = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": f"Answer from the context.\n{CONTEXT}"},
                {"role": "user", "content": QUESTION},
            ],
        )
    print(reply.choices[0].message.content)
    provider.shutdown()
    if logs is not None:
        logs.shutdown()  # flushes the batched events: after every span


def run_traceloop_langchain(api_url: str, key: str, model_url: str) -> None:
    import warnings

    from opentelemetry.instrumentation.langchain import LangchainInstrumentor
    from opentelemetry.sdk.trace import TracerProvider

    from tests.workers.assembler.test_langchain import rag_chain

    provider = _provider(api_url, key)
    assert isinstance(provider, TracerProvider)
    LangchainInstrumentor().instrument(tracer_provider=provider)
    with warnings.catch_warnings():  # langchain-core's deprecations, raised by the instrumented library
        warnings.simplefilter("ignore")
        print(rag_chain().invoke(QUESTION))
    provider.shutdown()


def run_openinference_langchain(api_url: str, key: str, model_url: str) -> None:
    import warnings

    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace import TracerProvider

    from tests.workers.assembler.test_langchain import rag_chain

    provider = _provider(api_url, key)
    assert isinstance(provider, TracerProvider)
    LangChainInstrumentor().instrument(tracer_provider=provider)
    with warnings.catch_warnings():  # langchain-core's deprecations, raised by the instrumentor
        warnings.simplefilter("ignore")
        print(rag_chain().invoke(QUESTION))
    provider.shutdown()


MODES = {
    "openai-v2": run_openai_v2,
    "openai-v2-logs": lambda api, key, model: run_openai_v2(api, key, model, "logs"),
    "openai-v2-logs-batched": lambda api, key, model: run_openai_v2(api, key, model, "logs-batched"),
    "openinference-langchain": run_openinference_langchain,
    "traceloop-langchain": run_traceloop_langchain,
}

if __name__ == "__main__":
    mode, api, api_key, model = sys.argv[1:5]
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r}: one of {sorted(MODES)}")
    MODES[mode](api, api_key, model)
