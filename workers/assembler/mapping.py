"""One trace's spans -> the body of one native trace event. Pure; the tables are in docs/otlp.md.

Each span is first read by its convention's reader into the neutral model (workers/assembler/readers.py);
what follows reads that model only (and ragmon's own `ragmon.*` settings), whatever the convention.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from service.contracts import TraceBody
from service.contracts import vocabulary as L
from service.contracts.fast import check_body
from workers.assembler.documents import context_documents, identifier
from workers.assembler.neutral import NeutralSpan
from workers.assembler.outcome import finish_reason, trace_error
from workers.assembler.readers import read
from workers.assembler.usage import answer_text, query_embedding, query_text, timings, usage
from workers.assembler.view import SpanView
from workers.runtime import boundedjson

# Closed set of reasons a trace is dropped (metric label of ragmon_assembler_traces_dropped_total).
DROP_REASONS = (
    "not_openinference",
    "no_retriever_or_llm",
    "no_query",
    "invalid_trace",
    "no_root",
    "processing_failed",
    "derived_record_too_large",
)  # the last two: dead-lettered (assembler.py)
RAGMON_FIELDS = {
    "variant": "ragmon.variant",
    "release": "ragmon.release",
    "request_id": "ragmon.request_id",
    "intent": "ragmon.intent",
    "sample_rate": "ragmon.sample_rate",
}
FILTERS_ATTRIBUTE = "ragmon.retrieval.filters"
EXCLUSION_ATTRIBUTE = "ragmon.retrieval.exclusion_sample"
LOOKUP_KEYS = frozenset({*RAGMON_FIELDS.values(), "session.id", FILTERS_ATTRIBUTE, EXCLUSION_ATTRIBUTE})


def _start_ns(span: SpanView) -> int:
    return span.start_ns


@dataclass
class Assembled:
    body: dict[str, Any] | None
    drop_reason: str | None = None
    detail: str = ""
    start_ns: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # spans by neutral kind
    unknown: dict[str, int] = field(default_factory=dict)  # attributes ragmon does not know, by convention


@dataclass
class TraceSpans:
    """Every span of one trace, with the resource attributes of its first export."""

    trace_id: str
    spans: list[SpanView]
    resource: dict[str, Any]
    # Computed once from the spans (every step of the mapping reads them): the neutral spans in start order,
    # spans by kind, the root.
    neutral: list[NeutralSpan] = field(init=False, repr=False)
    kinds: dict[str | None, list[NeutralSpan]] = field(init=False, repr=False)
    counted: list[NeutralSpan] = field(init=False, repr=False)  # spans whose unknown attributes are counted
    _root: NeutralSpan | None = field(init=False, repr=False)
    _found: dict[str, Any] | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        self.neutral = [read(view) for view in sorted(self.spans, key=_start_ns)]
        kinds: dict[str | None, list[NeutralSpan]] = {}
        counted = []
        root = None
        for span in self.neutral:
            kinds.setdefault(span.kind, []).append(span)
            if root is None and not span.parent_id:
                root = span
            if span.counted:
                counted.append(span)
        self.kinds, self.counted, self._root = kinds, counted, root

    def root(self) -> NeutralSpan | None:
        return self._root

    def of_kind(self, kind: str) -> list[NeutralSpan]:
        return list(self.kinds.get(kind, ()))

    def lookup(self, key: str, root: NeutralSpan) -> Any:
        """A ragmon.* setting: on the root span, in its `metadata`, on the resource, then on any span."""
        if key in LOOKUP_KEYS and root is self.root():
            return self._settings.get(key)
        for holder in self._holders(root):
            if holder.get(key) is not None:
                return holder[key]
        return None

    def _holders(self, root: NeutralSpan) -> Iterator[dict[str, Any]]:
        yield from (root.view.attrs, root.view.metadata, self.resource)
        for span in self.neutral:
            yield span.view.attrs
            yield span.view.metadata

    @property
    def _settings(self) -> dict[str, Any]:
        """Every key of LOOKUP_KEYS found, first holder wins, in one pass (a set intersection per holder)."""
        if self._found is None:
            self._found = self._find_settings()
        return self._found

    def _find_settings(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        root = self.root()
        if root is None:
            return found
        for holder in self._holders(root):
            if not holder:  # most spans have no metadata
                continue
            for key in LOOKUP_KEYS & holder.keys():
                if key not in found and holder[key] is not None:
                    found[key] = holder[key]
        return found


def _json_attribute(trace: TraceSpans, root: NeutralSpan, key: str) -> Any:
    value = trace.lookup(key, root)
    if isinstance(value, str):
        try:
            return boundedjson.loads(value)
        except ValueError:  # not JSON, or nested past the bound (never RecursionError: boundedjson.py)
            return value  # left for the contract validation to refuse by name
    return value


def _context(trace: TraceSpans, root: NeutralSpan) -> dict[str, Any]:
    out: dict[str, Any] = {"trace_id": trace.trace_id, "request_id": trace.trace_id}
    for name, key in RAGMON_FIELDS.items():
        value = trace.lookup(key, root)
        if value is not None:
            out[name] = _number(value) if name == "sample_rate" else value
    session = trace.lookup("session.id", root)
    if session is not None:
        out["session_id"] = identifier(session) or _hashed(str(session))
    return out


def _number(value: Any) -> Any:
    """A numeric string as a number; anything else unchanged, for the contract validation to refuse by name."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _hashed(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _retrieval(trace: TraceSpans, root: NeutralSpan) -> dict[str, Any]:
    retrieval: dict[str, Any] = {
        "documents": context_documents(trace.of_kind("RETRIEVER"), trace.of_kind("RERANKER"))
    }
    filters = _json_attribute(trace, root, FILTERS_ATTRIBUTE)
    if filters is not None:
        retrieval["filters"] = filters
    sample = _json_attribute(trace, root, EXCLUSION_ATTRIBUTE)
    if sample is not None:
        retrieval["exclusion_sample"] = sample
    return retrieval


def _census(trace: TraceSpans) -> tuple[dict[str, int], dict[str, int]]:
    """Spans by kind ("none": no convention read it), and the attributes ragmon does not know, by convention."""
    counts = {kind or "none": len(spans) for kind, spans in trace.kinds.items()}
    unknown: dict[str, int] = {}
    for span in trace.counted:
        for convention, n in span.unknown_attributes().items():
            unknown[convention] = unknown.get(convention, 0) + n
    return counts, unknown


def assemble(trace: TraceSpans) -> Assembled:
    """The trace event body, or why the trace is dropped (one of DROP_REASONS) with a detail."""
    counts, unknown = _census(trace)
    root = trace.root()
    if root is None:
        return Assembled(None, "no_root", "no span without a parent", counts=counts, unknown=unknown)
    start = root.start_ns
    if set(counts) == {"none"}:
        detail = "no span has openinference.span.kind or gen_ai.operation.name"
        return Assembled(None, "not_openinference", detail, start, counts, unknown)
    retrievers, llms = trace.of_kind("RETRIEVER"), trace.of_kind("LLM")
    if not retrievers and not llms:
        return Assembled(None, "no_retriever_or_llm", f"span kinds: {sorted(counts)}", start, counts, unknown)
    query = query_text(root, retrievers, llms)
    if query is None:
        detail = "neither the root, a retriever nor an LLM call has a text input or user message"
        return Assembled(None, "no_query", detail, start, counts, unknown)
    embedders = trace.of_kind("EMBEDDING")
    body = _context(trace, root)
    body["query"] = {"text": query[: L.MAX_QUERY_CHARS], **query_embedding(embedders, query)}
    body["retrieval"] = _retrieval(trace, root)
    body["answer"] = {"text": (answer_text(root, llms) or "")[: L.MAX_ANSWER_CHARS]}
    reason = finish_reason(llms)
    if reason is not None:
        body["answer"]["finish_reason"] = reason
    error = trace_error(root, trace.neutral, bool(body["answer"]["text"].strip()))
    if error is not None:
        body["error"] = error
    body["timings"] = timings(root, trace.neutral)
    body["usage"] = usage(llms, embedders)
    if check_body(
        "trace", body
    ):  # msgspec: never looser than the model, so what it accepts the model accepts
        return Assembled(body, start_ns=start, counts=counts, unknown=unknown)
    try:  # refused (or only stricter than the model): the model decides, and names the field and the rule
        TraceBody.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        return Assembled(None, "invalid_trace", f"body.{where}: {first['msg']}", start, counts, unknown)
    return Assembled(body, start_ns=start, counts=counts, unknown=unknown)
