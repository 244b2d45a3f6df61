"""What the evaluation exporter reads of a trace: what the deterministic checks need (decoded once by the
runtime); timings, usage, filters and the query are skipped without being built."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from service.contracts import vocabulary as L
from service.contracts.views import AnswerOutcome, Identifier, Name, ResponseFormat, TraceError, View


class CheckedAnswer(AnswerOutcome):
    text: Annotated[str, Meta(max_length=L.MAX_ANSWER_CHARS)] = ""


class CheckedDocument(View):
    id: Identifier
    text: Annotated[str, Meta(max_length=L.MAX_DOCUMENT_CHARS)]


class CheckedRetrieval(View):
    documents: Annotated[list[CheckedDocument], Meta(max_length=L.MAX_DOCUMENTS)] = []


class CheckedTrace(View):
    trace_id: Identifier
    request_id: Identifier | None = None
    variant: Name = "production"
    release: Identifier | None = None
    intent: Name | None = None
    answer: CheckedAnswer = msgspec.field(default_factory=CheckedAnswer)
    retrieval: CheckedRetrieval = msgspec.field(default_factory=CheckedRetrieval)
    error: TraceError | None = None
    response_format: ResponseFormat | None = None


VIEWS: dict[str, type[View]] = {"trace": CheckedTrace}
