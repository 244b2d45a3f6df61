"""What the evaluation exporter reads of a trace: what the deterministic checks need (decoded once by the
runtime); timings, usage, filters and the query are skipped without being built."""

from __future__ import annotations

import msgspec

from service.contracts.views import (
    AnswerText,
    Identifier,
    Name,
    ResponseFormat,
    TextRetrieval,
    TraceError,
    View,
)


class CheckedTrace(View):
    trace_id: Identifier
    request_id: Identifier | None = None
    variant: Name = "production"
    release: Identifier | None = None
    intent: Name | None = None
    answer: AnswerText = msgspec.field(default_factory=AnswerText)
    retrieval: TextRetrieval = msgspec.field(default_factory=TextRetrieval)
    error: TraceError | None = None
    response_format: ResponseFormat | None = None


VIEWS: dict[str, type[View]] = {"trace": CheckedTrace}
