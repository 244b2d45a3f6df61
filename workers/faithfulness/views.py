"""What the faithfulness worker reads of a trace (decoded once by the runtime).

The answer's text and whether it was refused, the documents' texts (the
premise), the ids the score event is keyed and labelled by, and the app's
sample rate it carries on. The query, usage, timings, filters, samples and the
documents' ids and metadata are skipped without being built.
"""

from __future__ import annotations

import msgspec

from service.contracts import vocabulary as L
from service.contracts.views import (
    AnswerText,
    Identifier,
    Name,
    ResponseFormat,
    SampleRate,
    TextRetrieval,
    TraceError,
    View,
)


class FaithfulnessTrace(View):
    trace_id: Identifier
    request_id: Identifier  # the sample is decided by request id (shadow twins together)
    variant: Name = L.DEFAULT_VARIANT
    release: Identifier | None = None
    intent: Name | None = None
    sample_rate: SampleRate = L.DEFAULT_SAMPLE_RATE
    retrieval: TextRetrieval = msgspec.field(default_factory=TextRetrieval)
    answer: AnswerText = msgspec.field(default_factory=AnswerText)  # citations too: the answer checks
    error: TraceError | None = None  # a failed request: never scored (docs/errors.md)
    response_format: ResponseFormat | None = None


VIEWS: dict[str, type[View]] = {"trace": FaithfulnessTrace}
