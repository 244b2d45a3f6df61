"""What the review sampler reads of a trace and of feedback (decoded once by the runtime).

A trace's display content (query, documents, answer, citations, the exclusion
sample) is what the review page shows, so the trace view names those fields,
with the contract's limits; timings, usage, filters and document metadata are
skipped without being built.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from service.contracts import vocabulary as L
from service.contracts.events import feedback_value_problem, thumbs_up
from service.contracts.views import (
    FeedbackKind,
    FeedbackValue,
    FiniteFloat,
    Identifier,
    Name,
    ResponseFormat,
    SampleRate,
    TraceError,
    View,
)


class ReviewQuery(View):
    text: Annotated[str, Meta(min_length=1, max_length=L.MAX_QUERY_CHARS)]


class ReviewDocument(View):
    id: Identifier
    text: Annotated[str, Meta(max_length=L.MAX_DOCUMENT_CHARS)]
    score: FiniteFloat | None = None


class ReviewCandidate(View):
    """A candidate of the exclusion sample: its id and score (its metadata is for the exclusion worker)."""

    id: Identifier
    score: FiniteFloat | None = None


class ReviewExclusionSample(View):
    candidates: Annotated[list[ReviewCandidate], Meta(max_length=L.MAX_CANDIDATES)]
    gold_ids: Annotated[list[Identifier], Meta(max_length=L.MAX_GOLD_IDS)] | None = None


class ReviewRetrieval(View):
    documents: Annotated[list[ReviewDocument], Meta(max_length=L.MAX_DOCUMENTS)] = []
    exclusion_sample: ReviewExclusionSample | None = None


class ReviewAnswer(View):
    text: Annotated[str, Meta(max_length=L.MAX_ANSWER_CHARS)] = ""
    refused: bool = False
    citations: Annotated[list[Identifier], Meta(max_length=L.MAX_CITATIONS)] = []


class ReviewTrace(View):
    trace_id: Identifier
    request_id: Identifier
    query: ReviewQuery
    variant: Name = L.DEFAULT_VARIANT
    release: Identifier | None = None
    sample_rate: SampleRate = L.DEFAULT_SAMPLE_RATE
    session_id: Identifier | None = None  # the golden split keeps a session's items in one set
    intent: Name | None = None
    retrieval: ReviewRetrieval = msgspec.field(default_factory=ReviewRetrieval)
    answer: ReviewAnswer = msgspec.field(default_factory=ReviewAnswer)
    response_format: ResponseFormat | None = None  # for the answer checks (stratum failed_check)
    error: TraceError | None = None


class ReviewFeedback(View):
    trace_id: Identifier
    kind: FeedbackKind
    value: FeedbackValue = None

    def __post_init__(self) -> None:
        problem = feedback_value_problem(self.kind, self.value)
        if problem is not None:
            raise ValueError(problem)

    @property
    def thumbs_up(self) -> bool | None:
        """As FeedbackBody.thumbs_up: True for true or 1, False for false or -1, None for other kinds."""
        return thumbs_up(self.kind, self.value)


VIEWS: dict[str, type[View]] = {"trace": ReviewTrace, "feedback": ReviewFeedback}
