"""What the faithfulness worker reads of a trace (decoded once by the runtime).

The answer's text and whether it was refused, the documents' texts (the
premise), the ids the score event is keyed and labelled by, and the app's
sample rate it carries on. The query, usage, timings, filters, samples and the
documents' ids and metadata are skipped without being built.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from service.contracts import vocabulary as L
from service.contracts.views import Identifier, Name, ResponseFormat, SampleRate, TraceError, View


class DocumentText(View):
    id: Identifier
    text: Annotated[str, Meta(max_length=L.MAX_DOCUMENT_CHARS)]


class FaithfulnessRetrieval(View):
    documents: Annotated[list[DocumentText], Meta(max_length=L.MAX_DOCUMENTS)] = []


class FaithfulnessAnswer(View):
    text: Annotated[str, Meta(max_length=L.MAX_ANSWER_CHARS)] = ""
    refused: bool = False
    citations: Annotated[list[Identifier], Meta(max_length=L.MAX_CITATIONS)] = []  # for the answer checks


class FaithfulnessTrace(View):
    trace_id: Identifier
    request_id: Identifier  # the sample is decided by request id (shadow twins together)
    variant: Name = L.DEFAULT_VARIANT
    release: Identifier | None = None
    intent: Name | None = None
    sample_rate: SampleRate = L.DEFAULT_SAMPLE_RATE
    retrieval: FaithfulnessRetrieval = msgspec.field(default_factory=FaithfulnessRetrieval)
    answer: FaithfulnessAnswer = msgspec.field(default_factory=FaithfulnessAnswer)
    error: TraceError | None = None  # a failed request: never scored (docs/errors.md)
    response_format: ResponseFormat | None = None


VIEWS: dict[str, type[View]] = {"trace": FaithfulnessTrace}
