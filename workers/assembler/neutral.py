"""One span as ragmon reads it, whatever convention wrote it (pure; the tables are in docs/otlp.md).

A convention is one reader (workers/assembler/openinference.py, workers/assembler/genai.py): it answers,
for one OTLP span, the questions the mapping asks (what kind of step, its input and output text, its
documents, messages, tokens, model, finish reason, error). `read(view)` picks the readers of a span and
returns a NeutralSpan; the mapping (workers/assembler/mapping.py) reads NeutralSpans only, never an
attribute. A span that carries both conventions is read by both: OpenInference's reader answers first,
field by field, and the GenAI reader fills in what it leaves absent; the kind is OpenInference's.

Every field is read on first use and kept: the mapping asks most fields of a few spans only (documents of
retrievers, tokens of LLM calls), so a span pays for what its event needs.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from workers.assembler.view import MAX_ERROR_TEXT, SpanView


class RawDocument(NamedTuple):
    """One retrieved document as a convention sends it: the mapping fits it into the contract (documents.py)."""

    id: Any
    content: Any
    score: Any
    metadata: Any  # a JSON object as text, or a dict


class Embedding(NamedTuple):
    vector: Any
    text: Any


class Reader(Protocol):
    """What a convention answers about one span; None, empty or zero when it does not say."""

    name: str  # the convention, a metric label value
    counts_unknown: bool  # whether its unknown attributes are counted (unknown_attributes)

    def kind(self, view: SpanView) -> str | None: ...
    def input_text(self, view: SpanView) -> str | None: ...
    def output_text(self, view: SpanView) -> str | None: ...
    def question(self, view: SpanView) -> str | None: ...
    def answers(self, view: SpanView) -> list[str]: ...
    def documents(self, view: SpanView) -> list[RawDocument]: ...
    def embedding_model(self, view: SpanView) -> str | None: ...
    def embeddings(self, view: SpanView) -> list[Embedding]: ...
    def tokens(self, view: SpanView, kind: str | None) -> dict[str, int]: ...
    def model(self, view: SpanView) -> str | None: ...
    def cost(self, view: SpanView) -> float | None: ...
    def finish_reason(self, view: SpanView) -> Any: ...
    def error_type(self, view: SpanView) -> str | None: ...
    def first_token_ns(self, view: SpanView) -> int | None: ...
    def unknown_attributes(self, view: SpanView) -> int: ...


_UNSET: Any = object()


class NeutralSpan:
    """The neutral model of one span: timing and status from OTLP itself, the rest from its readers."""

    __slots__ = (
        "view",
        "span_id",
        "parent_id",
        "start_ns",
        "end_ns",
        "events",
        "dropped_attributes",
        "readers",
        "kind",
        "counted",
        "_input",
        "_output",
        "_question",
        "_answers",
        "_documents",
        "_embedding_model",
        "_embeddings",
        "_tokens",
        "_model",
        "_cost",
        "_finish",
        "_error_type",
        "_first_token",
    )

    def __init__(self, view: SpanView, readers: tuple[Reader, ...], kind: str | None, counted: bool) -> None:
        self.view = view
        self.span_id, self.parent_id = view.span_id, view.parent_id
        self.start_ns, self.end_ns, self.events = view.start_ns, view.end_ns, view.events
        self.dropped_attributes = view.dropped_attributes
        self.readers = readers
        self.kind = kind  # OpenInference's kind names are the neutral kinds (LLM, RETRIEVER, EMBEDDING, ...)
        self.counted = counted  # a reader of it counts unknown attributes (any of readers' counts_unknown)
        self._input = self._output = self._question = self._answers = self._documents = _UNSET
        self._embedding_model = self._embeddings = self._tokens = self._model = self._cost = _UNSET
        self._finish = self._error_type = self._first_token = _UNSET

    # -- from OTLP itself (copied: the mapping reads them of every span) -----------

    @property
    def duration_ms(self) -> float:
        return self.view.duration_ms

    @property
    def failed(self) -> bool:
        """Status ERROR, or an error type set by the convention (GenAI's `error.type`)."""
        return self.view.failed or self.error_type is not None

    @property
    def error_texts(self) -> tuple[str, ...]:
        """What names the failure: the exception event's type and message, the status message, the error type."""
        kind, message = self.view.exception or ("", "")
        return kind, message, self.view.status_message, (self.error_type or "")[:MAX_ERROR_TEXT]

    # -- from the readers, first answer wins ----------------------------------

    @property
    def input_text(self) -> str | None:
        if self._input is _UNSET:
            found: Any = None
            for r in self.readers:
                t = r.input_text(self.view)
                if t:
                    found = t
                    break
            self._input = found
        return self._input

    @property
    def output_text(self) -> str | None:
        if self._output is _UNSET:
            found: Any = None
            for r in self.readers:
                t = r.output_text(self.view)
                if t:
                    found = t
                    break
            self._output = found
        return self._output

    @property
    def question(self) -> str | None:
        """The user's question an LLM call was asked (its last user message), where the root has no input."""
        if self._question is _UNSET:
            found: Any = None
            for r in self.readers:
                t = r.question(self.view)
                if t:
                    found = t
                    break
            self._question = found
        return self._question

    @property
    def answers(self) -> list[str]:
        """The texts of the span's output messages (assistant), in order."""
        if self._answers is _UNSET:
            found: Any = []
            for r in self.readers:
                a = r.answers(self.view)
                if a:
                    found = a
                    break
            self._answers = found
        return self._answers

    @property
    def documents(self) -> list[RawDocument]:
        """A retriever's documents, a reranker's output documents."""
        if self._documents is _UNSET:
            found: Any = []
            for r in self.readers:
                d = r.documents(self.view)
                if d:
                    found = d
                    break
            self._documents = found
        return self._documents

    @property
    def embedding_model(self) -> str | None:
        if self._embedding_model is _UNSET:
            self._embedding_model = next(
                (m for r in self.readers if (m := r.embedding_model(self.view))), None
            )
        return self._embedding_model

    @property
    def embeddings(self) -> list[Embedding]:
        if self._embeddings is _UNSET:
            found: Any = []
            for r in self.readers:
                e = r.embeddings(self.view)
                if e:
                    found = e
                    break
            self._embeddings = found
        return self._embeddings

    @property
    def tokens(self) -> dict[str, int]:
        """Token counts by the contract's token kinds (cached_prompt and reasoning apart, inside their totals)."""
        if self._tokens is _UNSET and len(self.readers) == 1:
            self._tokens = self.readers[0].tokens(self.view, self.kind)
        elif self._tokens is _UNSET:
            merged: dict[str, int] = {}
            for reader in self.readers:
                for kind, n in reader.tokens(self.view, self.kind).items():
                    merged.setdefault(kind, n)
            self._tokens = merged
        return self._tokens

    @property
    def model(self) -> str | None:
        if self._model is _UNSET:
            found: Any = None
            for r in self.readers:
                m = r.model(self.view)
                if m:
                    found = m
                    break
            self._model = found
        return self._model

    @property
    def cost(self) -> float | None:
        if self._cost is _UNSET:
            found: Any = None
            for r in self.readers:
                c = r.cost(self.view)
                if c is not None:
                    found = c
                    break
            self._cost = found
        return self._cost

    @property
    def finish_reason(self) -> Any:
        """The provider's finish reason as sent (outcome.py maps it onto the contract's set)."""
        if self._finish is _UNSET:
            self._finish = next(
                (f for r in self.readers if (f := r.finish_reason(self.view)) is not None), None
            )
        return self._finish

    @property
    def error_type(self) -> str | None:
        if self._error_type is _UNSET:
            found: Any = None
            for r in self.readers:
                e = r.error_type(self.view)
                if e:
                    found = e
                    break
            self._error_type = found
        return self._error_type

    @property
    def first_token_ns(self) -> int | None:
        if self._first_token is _UNSET:
            found: Any = None
            for r in self.readers:
                t = r.first_token_ns(self.view)
                if t:
                    found = t
                    break
            self._first_token = found
        return self._first_token

    def unknown_attributes(self) -> dict[str, int]:
        """Attributes of the span's conventions that ragmon does not know, by convention (counted, ignored)."""
        out: dict[str, int] = {}
        for reader in self.readers:
            n = reader.unknown_attributes(self.view)
            if n:
                out[reader.name] = n
        return out
