"""What the exclusion worker reads of a trace and a label (decoded once by the runtime)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from service.contracts import vocabulary as L
from service.contracts.views import (
    ExclusionSample,
    Filters,
    Identifier,
    Metadata,
    Name,
    TraceError,
    View,
)


class ContextDocument(View):
    """A context document: its id (the context stage of the retrieval metrics) and its metadata (leaks)."""

    id: Identifier
    metadata: Metadata = {}


class ExclusionRetrieval(View):
    documents: Annotated[list[ContextDocument], Meta(max_length=L.MAX_DOCUMENTS)] = []
    filters: Filters = msgspec.field(default_factory=Filters)
    exclusion_sample: ExclusionSample | None = None


class ExclusionTrace(View):
    trace_id: Identifier
    request_id: Identifier  # the exclusion result event is keyed like its trace (shadow pairing)
    variant: Name = L.DEFAULT_VARIANT
    release: Identifier | None = None
    intent: Name | None = None
    retrieval: ExclusionRetrieval = msgspec.field(default_factory=ExclusionRetrieval)
    error: TraceError | None = None  # a failed request: its sample is not evaluated (docs/errors.md)


class ExclusionLabel(View):
    trace_id: Identifier
    gold_ids: Annotated[list[Identifier], Meta(max_length=L.MAX_GOLD_IDS)] | None = None


VIEWS: dict[str, type[View]] = {"trace": ExclusionTrace, "label": ExclusionLabel}
