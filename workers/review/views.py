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
from service.contracts.views import (
    FeedbackView,
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


class ReviewFeedback(FeedbackView):
    pass


VIEWS: dict[str, type[View]] = {"trace": ReviewTrace, "feedback": ReviewFeedback}
