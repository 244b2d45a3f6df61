"""The GenAI reader: OpenTelemetry's `gen_ai.*` spans -> the neutral model (table in docs/otlp.md).

Read: the GenAI semantic conventions v1.37 to v1.44 (messages as the JSON attributes
`gen_ai.input.messages` / `gen_ai.output.messages`, parts of type `text`), the older names still sent
(`gen_ai.usage.prompt_tokens` / `completion_tokens`, `gen_ai.system`, Traceloop's indexed
`gen_ai.prompt.N.*` / `gen_ai.completion.N.*` and `gen_ai.usage.cache_read_input_tokens`). A `gen_ai.*`
attribute outside these is counted (ragmon_assembler_unknown_attributes_total) and ignored.
"""

from __future__ import annotations

from typing import Any

from workers.assembler.neutral import Embedding, RawDocument
from workers.assembler.view import SpanView
from workers.runtime import boundedjson

OPERATION_KEY = "gen_ai.operation.name"
# gen_ai.operation.name -> the neutral kind (OpenInference's names); an operation outside it is UNKNOWN.
KIND_OF_OPERATION = {
    "chat": "LLM",
    "text_completion": "LLM",
    "generate_content": "LLM",
    "completion": "LLM",  # Traceloop's older name
    "embeddings": "EMBEDDING",
    "embedding": "EMBEDDING",
    "retrieval": "RETRIEVER",
    "vector_db_retrieve": "RETRIEVER",  # Traceloop's LangChain retrievers
    "execute_tool": "TOOL",
    "invoke_agent": "AGENT",
    "create_agent": "AGENT",
    "invoke_workflow": "CHAIN",
    "execute_task": "CHAIN",  # Traceloop's LangChain runnables
}
# Token attributes -> the contract's token kinds, per neutral kind; the first key present wins.
# input_tokens include the cached ones and output_tokens the reasoning ones (as OpenInference's counts).
_LLM_TOKENS = (
    ("prompt", ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")),
    ("completion", ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")),
    ("cached_prompt", ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")),
    ("reasoning", ("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens")),
)
_EMBEDDING_TOKENS = (("embedding", ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")),)
# Every gen_ai.* attribute of the conventions read, mapped or deliberately not (request parameters, ids).
KNOWN_ATTRIBUTES = frozenset(
    {
        OPERATION_KEY,
        "gen_ai.provider.name",
        "gen_ai.system",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.response.id",
        "gen_ai.response.finish_reasons",
        "gen_ai.response.time_to_first_chunk",
        "gen_ai.request.max_tokens",
        "gen_ai.request.temperature",
        "gen_ai.request.top_p",
        "gen_ai.request.top_k",
        "gen_ai.request.stop_sequences",
        "gen_ai.request.frequency_penalty",
        "gen_ai.request.presence_penalty",
        "gen_ai.request.seed",
        "gen_ai.request.choice.count",
        "gen_ai.request.encoding_formats",
        "gen_ai.request.stream",
        "gen_ai.output.type",
        "gen_ai.conversation.id",
        "gen_ai.agent.id",
        "gen_ai.agent.name",
        "gen_ai.agent.description",
        "gen_ai.agent.version",
        "gen_ai.workflow.name",
        "gen_ai.prompt.name",
        "gen_ai.data_source.id",
        "gen_ai.embeddings.dimension.count",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.input.messages.ref",  # the messages uploaded elsewhere (a completion hook): not read
        "gen_ai.output.messages.ref",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "gen_ai.tool.name",
        "gen_ai.tool.type",
        "gen_ai.tool.description",
        "gen_ai.tool.call.id",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.retrieval.query.text",
        "gen_ai.retrieval.documents",
        "gen_ai.retrieval.top_k",
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
        "gen_ai.openai.request.service_tier",
        "gen_ai.openai.response.service_tier",
        "gen_ai.openai.response.system_fingerprint",
        "gen_ai.openai.request.response_format",
        "gen_ai.openai.request.seed",
        "gen_ai.openai.api_base",
        "gen_ai.usage.total_tokens",
        # Traceloop's tasks (opentelemetry-instrumentation-langchain 0.62): input and output as JSON
        "gen_ai.task.name",
        "gen_ai.task.id",
        "gen_ai.task.parent.id",
        "gen_ai.task.input",
        "gen_ai.task.output",
        "gen_ai.task.status",
        *(key for _, keys in _LLM_TOKENS for key in keys),
    }
)
# Traceloop's indexed messages: gen_ai.prompt.N.{role,content}, gen_ai.completion.N.{role,content,finish_reason}.
_INDEXED_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.")
# The last: Traceloop's copy of LangChain's model metadata, where its gen_ai.*.model say "unknown".
MODEL_KEYS = (
    "gen_ai.response.model",
    "gen_ai.request.model",
    "traceloop.association.properties.ls_model_name",
)
DOCUMENT_TEXT_KEYS = ("content", "text", "page_content")


def _json(value: Any) -> Any:
    """A JSON attribute (text) parsed, or the structured value as sent; None when it is not JSON."""
    if isinstance(value, str):
        try:
            return boundedjson.loads(value)
        except ValueError:
            return None
    return value


def _parts_text(message: Any) -> str:
    """The text of one message: its `parts` of type text (v1.37+), else its `content` (older shapes)."""
    if not isinstance(message, dict):
        return ""
    parts = message.get("parts")
    if isinstance(parts, list):
        texts = [
            p["content"]
            for p in parts
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)
        ]
        return "".join(texts)
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _messages(view: SpanView, key: str, indexed: str) -> list[dict[str, Any]]:
    parsed = _json(view.attrs.get(key))
    if isinstance(parsed, list):
        return [m for m in parsed if isinstance(m, dict)]
    return list(view.indexed(indexed).values())  # Traceloop's gen_ai.prompt.N.* / gen_ai.completion.N.*


def _task(view: SpanView, key: str, field: str) -> Any:
    """A field of Traceloop's JSON `gen_ai.task.input` / `gen_ai.task.output` ({"inputs": ...}, {"query": ...})."""
    value = view.attrs.get(key)
    if not isinstance(value, str) or not value.startswith("{"):
        return None
    parsed = _json(value)
    return parsed.get(field) if isinstance(parsed, dict) else None


def _task_text(view: SpanView, key: str, fields: tuple[str, ...]) -> str | None:
    if key not in view.attrs:
        return None
    for field in fields:
        found = _task(view, key, field)
        if isinstance(found, str) and found:
            return found
    return None


def _number(view: SpanView, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        n = view.number(key)
        if n is not None and n >= 0:
            return int(n)
    return None


class GenAIReader:
    name = "gen_ai"
    counts_unknown = True

    def kind(self, view: SpanView) -> str | None:
        operation = view.attrs.get(OPERATION_KEY)
        if not isinstance(operation, str) or not operation:
            return None
        return KIND_OF_OPERATION.get(operation.strip().lower(), "UNKNOWN")

    def input_text(self, view: SpanView) -> str | None:
        return view.text("gen_ai.retrieval.query.text") or _task_text(
            view, "gen_ai.task.input", ("query", "inputs")
        )

    def output_text(self, view: SpanView) -> str | None:
        return _task_text(view, "gen_ai.task.output", ("outputs",))  # an LLM call's output is its messages

    def question(self, view: SpanView) -> str | None:
        for message in reversed(_messages(view, "gen_ai.input.messages", "gen_ai.prompt")):
            if message.get("role") == "user":
                text = _parts_text(message)
                if text:
                    return text
        return None

    def answers(self, view: SpanView) -> list[str]:
        messages = _messages(view, "gen_ai.output.messages", "gen_ai.completion")
        return [t for m in messages if m.get("role", "assistant") == "assistant" and (t := _parts_text(m))]

    def documents(self, view: SpanView) -> list[RawDocument]:
        parsed = _json(view.attrs.get("gen_ai.retrieval.documents"))
        if parsed is None and "gen_ai.task.output" in view.attrs:
            parsed = _task(view, "gen_ai.task.output", "documents")  # Traceloop's retriever output
        if not isinstance(parsed, list):
            return []
        source = view.text("gen_ai.data_source.id")
        out = []
        for doc in parsed:
            if not isinstance(doc, dict):
                continue
            content = next((doc[k] for k in DOCUMENT_TEXT_KEYS if isinstance(doc.get(k), str)), None)
            metadata = doc.get("metadata")
            metadata = dict(metadata) if isinstance(metadata, dict) else {}
            if source is not None:
                metadata.setdefault("data_source_id", source)
            out.append(RawDocument(doc.get("id"), content, doc.get("score"), metadata))
        return out

    def embedding_model(self, view: SpanView) -> str | None:
        return self.model(view)

    def embeddings(self, view: SpanView) -> list[Embedding]:
        return []  # the conventions carry no vectors

    def tokens(self, view: SpanView, kind: str | None) -> dict[str, int]:
        table = _LLM_TOKENS if kind == "LLM" else _EMBEDDING_TOKENS if kind == "EMBEDDING" else ()
        out = {}
        for token_kind, keys in table:
            n = _number(view, keys)
            if n is not None:
                out[token_kind] = n
        return out

    def model(self, view: SpanView) -> str | None:
        for key in MODEL_KEYS:
            model = view.text(key)
            if model and model != "unknown":  # Traceloop's placeholder when LangChain names no model
                return model
        return None

    def cost(self, view: SpanView) -> float | None:
        return None  # the conventions have no cost: the metrics worker prices the tokens

    def finish_reason(self, view: SpanView) -> Any:
        value = view.attrs.get("gen_ai.response.finish_reasons")
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, str) and value:
            return value
        for message in reversed(_messages(view, "gen_ai.output.messages", "gen_ai.completion")):
            reason = message.get("finish_reason")
            if isinstance(reason, str) and reason:
                return reason
        return None

    def error_type(self, view: SpanView) -> str | None:
        return view.text("error.type")

    def first_token_ns(self, view: SpanView) -> int | None:
        seconds = view.number("gen_ai.response.time_to_first_chunk")
        return view.start_ns + int(seconds * 1e9) if seconds is not None and seconds >= 0 else None

    def unknown_attributes(self, view: SpanView) -> int:
        return sum(
            1
            for key in view.attrs
            if key.startswith("gen_ai.")
            and key not in KNOWN_ATTRIBUTES
            and not key.startswith(_INDEXED_PREFIXES)
        )


GENAI = GenAIReader()
