"""What the metrics worker reads of traces, feedback and releases (decoded once by the runtime)."""

from __future__ import annotations

import msgspec

from service.contracts.views import (
    AnswerOutcome,
    FeedbackKind,
    FeedbackReason,
    Identifier,
    Name,
    SampleRate,
    Timings,
    Usage,
    View,
)


class MetricsTrace(View):
    trace_id: Identifier
    variant: Name = "production"
    release: Identifier | None = None
    sample_rate: SampleRate = 1.0
    intent: Name | None = None
    answer: AnswerOutcome = msgspec.field(default_factory=AnswerOutcome)
    timings: Timings = {}
    usage: Usage = msgspec.field(default_factory=Usage)


class MetricsFeedback(View):
    trace_id: Identifier
    kind: FeedbackKind
    reason: FeedbackReason | None = None


class MetricsRelease(View):
    release: Identifier
    variant: Name = "production"


VIEWS: dict[str, type[View]] = {"trace": MetricsTrace, "feedback": MetricsFeedback, "release": MetricsRelease}
