"""What the shadow worker reads of a trace (decoded once by the runtime, service/contracts/views.py).

Only the fields its outcomes come from (workers/shadow/outcomes.py): the
request id and variant it pairs by, the intent and relevance predicates its
slices come from, the answer (refused, non-empty, cited), timings and usage.
The contract's rules hold on each of them; a trace that breaks one is a dead
letter with the field and the rule, as with the full models.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from service.contracts import vocabulary as L
from service.contracts.views import Identifier, Name, Predicates, Timings, TraceError, Usage, View


class ShadowAnswer(View):
    text: Annotated[str, Meta(max_length=L.MAX_ANSWER_CHARS)] = ""  # read only for "empty or not"
    refused: bool = False
    citations: Annotated[list[Identifier], Meta(max_length=L.MAX_CITATIONS)] = []


class ShadowFilters(View):
    relevance: Predicates = []  # slices come from its `field eq value` predicates; entitlement is not read


class ShadowRetrieval(View):
    filters: ShadowFilters = msgspec.field(default_factory=ShadowFilters)


class ShadowTrace(View):
    request_id: Identifier
    variant: Name = L.DEFAULT_VARIANT
    intent: Name | None = None
    retrieval: ShadowRetrieval = msgspec.field(default_factory=ShadowRetrieval)
    answer: ShadowAnswer = msgspec.field(default_factory=ShadowAnswer)
    timings: Timings = {}
    usage: Usage = msgspec.field(default_factory=Usage)
    error: TraceError | None = None  # a failed request: no outcome to compare (docs/errors.md)


VIEWS: dict[str, type[View]] = {"trace": ShadowTrace}
