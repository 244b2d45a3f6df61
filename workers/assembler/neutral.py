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

from typing import Any, Generic, NamedTuple, Protocol, TypeVar, overload

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


T = TypeVar("T")


class _FirstAnswer(Generic[T]):
    """A field of NeutralSpan: the first answer of its readers (the Reader method of the same name) that is
    not empty, asked on first use and kept in the span's __dict__, which shadows this (non-data) descriptor.
    With `many`, no answer is a fresh empty list, else None; with `falsy_answers`, any answer but None counts.
    """

    def __init__(self, doc: str | None = None, *, many: bool = False, falsy_answers: bool = False) -> None:
        self.__doc__ = doc
        self.many = many
        self.falsy_answers = falsy_answers
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, span: None, owner: type) -> _FirstAnswer[T]: ...
    @overload
    def __get__(self, span: NeutralSpan, owner: type | None = None) -> T: ...
    def __get__(self, span: NeutralSpan | None, owner: type | None = None) -> T | _FirstAnswer[T]:
        if span is None:
            return self
        name, view = self.name, span.view
        found: Any
        for r in span.readers:
            found = getattr(r, name)(view)
            if found or (found is not None and self.falsy_answers):
                break
        else:
            found = [] if self.many else None
        span.__dict__[name] = found
        return found


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
        "_tokens",
        "__dict__",  # the _FirstAnswer fields, once read
    )

    def __init__(self, view: SpanView, readers: tuple[Reader, ...], kind: str | None, counted: bool) -> None:
        self.view = view
        self.span_id, self.parent_id = view.span_id, view.parent_id
        self.start_ns, self.end_ns, self.events = view.start_ns, view.end_ns, view.events
        self.dropped_attributes = view.dropped_attributes
        self.readers = readers
        self.kind = kind  # OpenInference's kind names are the neutral kinds (LLM, RETRIEVER, EMBEDDING, ...)
        self.counted = counted  # a reader of it counts unknown attributes (any of readers' counts_unknown)
        self._tokens: dict[str, int] | None = None

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

    input_text = _FirstAnswer[str | None]()
    output_text = _FirstAnswer[str | None]()
    question = _FirstAnswer[str | None](
        "The user's question an LLM call was asked (its last user message), where the root has no input."
    )
    answers = _FirstAnswer[list[str]](
        "The texts of the span's output messages (assistant), in order.", many=True
    )
    documents = _FirstAnswer[list[RawDocument]](
        "A retriever's documents, a reranker's output documents.", many=True
    )
    embedding_model = _FirstAnswer[str | None]()
    embeddings = _FirstAnswer[list[Embedding]](many=True)
    model = _FirstAnswer[str | None]()
    cost = _FirstAnswer[float | None](falsy_answers=True)
    finish_reason = _FirstAnswer[Any](
        "The provider's finish reason as sent (outcome.py maps it onto the contract's set).",
        falsy_answers=True,
    )
    error_type = _FirstAnswer[str | None]()
    first_token_ns = _FirstAnswer[int | None]()

    @property
    def tokens(self) -> dict[str, int]:
        """Token counts by the contract's token kinds (cached_prompt and reasoning apart, inside their totals)."""
        if self._tokens is None and len(self.readers) == 1:
            self._tokens = self.readers[0].tokens(self.view, self.kind)
        elif self._tokens is None:
            merged: dict[str, int] = {}
            for reader in self.readers:
                for kind, n in reader.tokens(self.view, self.kind).items():
                    merged.setdefault(kind, n)
            self._tokens = merged
        return self._tokens

    def unknown_attributes(self) -> dict[str, int]:
        """Attributes of the span's conventions that ragmon does not know, by convention (counted, ignored)."""
        out: dict[str, int] = {}
        for reader in self.readers:
            n = reader.unknown_attributes(self.view)
            if n:
                out[reader.name] = n
        return out
