"""A real LangChain RAG chain, traced by the real OpenInference instrumentor, exported by the OTel SDK's
OTLP/HTTP exporter to a running API, assembled, and counted by the metrics worker like a native trace."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from openinference.instrumentation import using_metadata, using_session, using_user
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import CollectorRegistry

from service.api.redaction import Pseudonymizer
from tests.service.api.api_events import ACME_KEY
from tests.service.api.api_harness import PSEUDONYM_KEY, KafkaReader, RunningApi
from tests.workers.assembler.oi_spans import store_records
from workers.assembler.__main__ import build_store
from workers.assembler.assembler import Assembler
from workers.assembler.config import AssemblerConfig
from workers.assembler.documents import content_id
from workers.assembler.metrics import AssemblerMetrics
from workers.metrics.config import MetricsConfig
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor
from workers.runtime.decode import decode_record
from workers.runtime.emitter import KafkaEmitter
from workers.runtime.types import Event

# openinference-instrumentation-langchain 0.1.80 calls AIMessage.text() as a method, which langchain-core 1.8
# deprecates; the warning is theirs, not ours (the suite turns warnings into errors).
pytestmark = pytest.mark.filterwarnings("ignore::langchain_core._api.deprecation.LangChainDeprecationWarning")

QUESTION = "How do I reset the router?"
ANSWER = "Hold the pin button for ten seconds."


def rag_chain() -> Runnable[str, str]:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))
    store.add_documents(
        [
            Document(page_content="Reset the router with the pin button.", metadata={"id": "kb-1"}),
            Document(page_content="The warranty lasts two years.", metadata={"source": "terms"}),
        ]
    )
    reply = AIMessage(
        content=ANSWER,
        usage_metadata={
            "input_tokens": 50,
            "output_tokens": 6,
            "total_tokens": 56,
            "input_token_details": {"cache_read": 20},
        },
    )
    llm = GenericFakeChatModel(messages=iter([reply]), metadata={"ls_model_name": "fake-gpt"})
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context.\n{context}"), ("human", "{question}")]
    )
    context = store.as_retriever(search_kwargs={"k": 2}) | (
        lambda docs: "\n".join(d.page_content for d in docs)
    )
    return {"context": context, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()


@pytest.fixture
def kafka(kafka_bootstrap: str) -> KafkaReader:
    return KafkaReader(kafka_bootstrap)


@pytest.fixture
def instrumented(api: RunningApi) -> Iterator[TracerProvider]:
    provider = TracerProvider(
        resource=Resource.create({"service.name": "rag-app", "ragmon.release": "2026.12.1"})
    )
    exporter = OTLPSpanExporter(
        endpoint=f"{api.url}/v1/traces", headers={"Authorization": f"Bearer {ACME_KEY}"}
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    yield provider
    instrumentor.uninstrument()
    provider.shutdown()


def assemble_topic(api: RunningApi, kafka: KafkaReader, client: redis.Redis) -> list[Any]:
    config = AssemblerConfig(quiet_period_s=0)
    emitter = KafkaEmitter(api.settings, client_id="test-assembler")
    try:
        assembler = Assembler(
            config, build_store(client, config), emitter, api.topics, AssemblerMetrics(CollectorRegistry())
        )
        store_records(assembler, kafka.records(api.topics.spans))
        assert assembler.tick() == 1
    finally:
        emitter.close()
    return [decode_record(r, "trace") for r in kafka.records(api.topics.traces)]


def test_langchain_rag_chain_becomes_a_native_trace_event(
    api: RunningApi, kafka: KafkaReader, instrumented: TracerProvider, redis_client: redis.Redis
) -> None:
    # How an app sets ragmon's fields without ragmon code: OpenInference's own context managers.
    filters = {"entitlement": [{"field": "tenant", "op": "eq", "value": "acme"}], "relevance": []}
    with (
        using_session("sess-7"),
        using_user("ann@example.com"),
        using_metadata({"ragmon.intent": "billing", "ragmon.retrieval.filters": filters}),
    ):
        assert rag_chain().invoke(QUESTION) == ANSWER
    assert instrumented.force_flush(10_000)
    [event] = assemble_topic(api, kafka, redis_client)
    assert isinstance(event, Event), event  # decoded and validated exactly like a native event
    body = event.body
    assert body.query.text == QUESTION and body.answer.text == ANSWER and body.release == "2026.12.1"
    # in the retriever's order (the fake embedding's similarity); ids from metadata, else a content hash
    assert {d.id: d.text for d in body.retrieval.documents} == {
        "kb-1": "Reset the router with the pin button.",
        content_id("The warranty lasts two years."): "The warranty lasts two years.",
    }
    # the session id is pseudonymized by the API (keyed hash), as a native event's session_id is
    assert body.session_id == Pseudonymizer(PSEUDONYM_KEY.encode()).identifier("acme", "sess-7")
    assert body.intent == "billing"
    assert body.retrieval.filters.model_dump(exclude_none=True)["entitlement"] == filters["entitlement"]
    assert all(
        b"ann@example.com" not in r.value for r in kafka.records(api.topics.spans)
    )  # user.id never in clear
    assert body.usage.model == "fake-gpt"
    assert body.usage.tokens == {"prompt": 50, "completion": 6, "cached_prompt": 20}
    assert {"retrieval", "generation", "total"} <= set(body.timings)
    assert body.timings["total"] >= body.timings["retrieval"] + body.timings["generation"] > 0

    registry = CollectorRegistry()
    metrics = MetricsProcessor(MetricsConfig(), MetricsWorkerMetrics(registry), redis_client)
    assert metrics.process([event]) == []

    def value(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    tv = {"tenant": "acme", "variant": "production"}
    assert value("ragmon_rag_queries_total", **tv, intent="billing") == 1
    assert value("ragmon_rag_stage_duration_seconds_count", **tv, stage="retrieval") == 1
    # a model outside the price table is labelled "other", as for native traces
    assert value("ragmon_rag_tokens_total", **tv, kind="cached_prompt", model="other") == 20
