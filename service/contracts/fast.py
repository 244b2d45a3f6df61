"""The whole v1 body contract as msgspec structs: the API's fast check of an event body.

pydantic (events.py) stays the contract's definition and the only source of
error messages. The API first checks each body with these structs, which
apply the same rules to every field in one pass without building models
(about a quarter of pydantic's time on a trace, docs/throughput.md); only a
body they refuse is validated by pydantic, which then names the field and
the rule, or accepts what msgspec is stricter about (pydantic's coercions of
"0.5" or "yes"). So these structs may be stricter than the models, never
looser: tests/service/contracts/test_fast.py checks both on valid and broken
bodies.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from service.contracts import limits as L
from service.contracts.events import LABEL_NEEDS_A_JUDGEMENT, feedback_value_problem
from service.contracts.views import (
    AnswerOutcome,
    Candidate,
    ExclusionSample,
    FeedbackKind,
    FeedbackReason,
    FeedbackValue,
    Filters,
    FiniteFloat,
    Identifier,
    Metadata,
    ModelName,
    Name,
    QueryEmbedding,
    SampleRate,
    Timings,
    TokenKind,
    Usage,
    View,
)

__all__ = ["Candidate", "ExclusionSample", "Filters", "Usage", "check_body"]

Ids = Annotated[list[Identifier], Meta(max_length=L.MAX_GOLD_IDS)]
Note = Annotated[str, Meta(max_length=L.MAX_NOTE_CHARS)]


class Document(View, forbid_unknown_fields=True):
    id: Identifier
    text: Annotated[str, Meta(max_length=L.MAX_DOCUMENT_CHARS)]
    score: FiniteFloat | None = None
    metadata: Metadata = {}


class Retrieval(View, forbid_unknown_fields=True):
    documents: Annotated[list[Document], Meta(max_length=L.MAX_DOCUMENTS)] = []
    filters: Filters = msgspec.field(default_factory=Filters)
    exclusion_sample: ExclusionSample | None = None


class Query(QueryEmbedding, forbid_unknown_fields=True):
    pass


class Answer(AnswerOutcome, forbid_unknown_fields=True):
    text: Annotated[str, Meta(max_length=L.MAX_ANSWER_CHARS)] = ""


class TraceBody(View, forbid_unknown_fields=True):
    trace_id: Identifier
    request_id: Identifier
    query: Query
    variant: Name = "production"
    release: Identifier | None = None
    sample_rate: SampleRate = 1.0
    session_id: Identifier | None = None
    intent: Name | None = None
    retrieval: Retrieval = msgspec.field(default_factory=Retrieval)
    answer: Answer = msgspec.field(default_factory=Answer)
    timings: Timings = {}
    usage: Usage = msgspec.field(default_factory=Usage)


class FeedbackBody(View, forbid_unknown_fields=True):
    trace_id: Identifier
    kind: FeedbackKind
    value: FeedbackValue = None
    reason: FeedbackReason | None = None
    document_id: Identifier | None = None

    def __post_init__(self) -> None:
        problem = feedback_value_problem(self.kind, self.value)
        if problem is not None:
            raise ValueError(problem)


class ReleaseBody(View, forbid_unknown_fields=True):
    release: Identifier
    variant: Name = "production"
    description: Note | None = None


class LabelBody(View, forbid_unknown_fields=True):
    trace_id: Identifier
    gold_ids: Ids | None = None
    faithful: bool | None = None
    answerable: bool | None = None
    reviewer: Identifier | None = None
    note: Note | None = None

    def __post_init__(self) -> None:
        if self.gold_ids is None and self.faithful is None and self.answerable is None:
            raise ValueError(LABEL_NEEDS_A_JUDGEMENT)


_BODIES: dict[str, type[View]] = {"trace": TraceBody, "feedback": FeedbackBody, "release": ReleaseBody,
                                  "label": LabelBody}
_ = (ModelName, TokenKind)  # the Usage and Query structs reuse them: every rule lives in views.py


def check_body(event_type: str, body: Any) -> bool:
    """True when `body` (parsed JSON) fits the contract of `event_type`; False: ask pydantic why."""
    try:
        msgspec.convert(body, _BODIES[event_type])
    except (msgspec.ValidationError, KeyError):
        return False
    return True
