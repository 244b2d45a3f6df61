"""What the metrics worker reads of traces, feedback and releases (decoded once by the runtime)."""

from __future__ import annotations

import msgspec

from service.contracts.views import (
    AnswerText,
    FeedbackReason,
    FeedbackView,
    Identifier,
    ModelName,
    Name,
    ReleaseMarker,
    ResponseFormat,
    SampleRate,
    TextRetrieval,
    Timings,
    TraceError,
    Usage,
    View,
)


class MetricsRetrieval(TextRetrieval):
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
    answer: AnswerText = msgspec.field(default_factory=AnswerText)  # its text: the answer checks read it
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
