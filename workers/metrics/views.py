"""What the metrics worker reads of traces, feedback and releases (decoded once by the runtime)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from service.contracts import vocabulary as L
from service.contracts.views import (
    AnswerOutcome,
    FeedbackReason,
    FeedbackView,
    Identifier,
    ModelName,
    Name,
    ReleaseMarker,
    ResponseFormat,
    SampleRate,
    Timings,
    TraceError,
    Usage,
    View,
)


class MetricsAnswer(AnswerOutcome):
    text: Annotated[str, Meta(max_length=L.MAX_ANSWER_CHARS)] = ""  # the answer checks read it


class MetricsDocument(View):
    id: Identifier
    text: Annotated[str, Meta(max_length=L.MAX_DOCUMENT_CHARS)]


class MetricsRetrieval(View):
    documents: Annotated[list[MetricsDocument], Meta(max_length=L.MAX_DOCUMENTS)] = []
    index_embedding_model: ModelName | None = None
    index_version: ModelName | None = None  # a new index taking the traffic is a change (changes.py)


class MetricsQuery(View):
    embedding_model: ModelName | None = None  # compared with the index's (an encoder mismatch)


class MetricsTrace(View):
    trace_id: Identifier
    query: MetricsQuery
    variant: Name = "production"
    release: Identifier | None = None
    sample_rate: SampleRate = 1.0
    intent: Name | None = None
    answer: MetricsAnswer = msgspec.field(default_factory=MetricsAnswer)
    retrieval: MetricsRetrieval = msgspec.field(default_factory=MetricsRetrieval)
    timings: Timings = {}
    usage: Usage = msgspec.field(default_factory=Usage)
    error: TraceError | None = None
    response_format: ResponseFormat | None = None


class MetricsFeedback(FeedbackView):
    """Thumbs (true/1 up, false/-1 down), dwell seconds and the rest, with the reason given."""

    reason: FeedbackReason | None = None

    @property
    def dwell_seconds(self) -> float | None:
        v = self.value
        return float(v) if self.kind == "dwell" and isinstance(v, int | float) else None


class MetricsRelease(ReleaseMarker):
    """The whole marker: the release, its variant, and which component changed from and to what."""


VIEWS: dict[str, type[View]] = {"trace": MetricsTrace, "feedback": MetricsFeedback, "release": MetricsRelease}
