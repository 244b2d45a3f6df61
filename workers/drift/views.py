"""What the drift worker reads of a trace (decoded once by the runtime)."""

from __future__ import annotations

from service.contracts import vocabulary as L
from service.contracts.views import Name, QueryEmbedding, View


class DriftTrace(View):
    query: QueryEmbedding
    variant: Name = L.DEFAULT_VARIANT
    intent: Name | None = None


VIEWS: dict[str, type[View]] = {"trace": DriftTrace}
