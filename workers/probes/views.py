"""What the probes worker reads of a probe trace and of a release marker (decoded once by the runtime)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from service.contracts import vocabulary as L
from service.contracts.views import Identifier, ModelName, Name, ProbeMark, ReleaseMarker, View


class _Document(View):
    id: Identifier


class _Retrieval(View):
    documents: Annotated[list[_Document], Meta(max_length=L.MAX_DOCUMENTS)] = []
    index_embedding_model: ModelName | None = None
    index_version: ModelName | None = None


class _Query(View):
    embedding_model: ModelName | None = None


class ProbeTrace(View):
    """The probe mark, the version that answered and the retrieved ids in prompt order."""

    query: _Query
    probe: ProbeMark | None = None
    variant: Name = L.DEFAULT_VARIANT
    retrieval: _Retrieval = msgspec.field(default_factory=_Retrieval)

    @property
    def embedding_model(self) -> str:
        """The query's embedding model, else the index's; '' when the trace names neither."""
        return self.query.embedding_model or self.retrieval.index_embedding_model or ""


class Release(ReleaseMarker):
    """The marker's release, variant and component (only an index-side change declares a probe change)."""


VIEWS = {"trace": ProbeTrace, "release": Release}
