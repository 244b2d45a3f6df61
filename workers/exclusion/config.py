"""The `exclusion` section of the ragmon config file (validated at start)."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from service.contracts import vocabulary as L
from service.contracts.config import load_section

IntentName = Annotated[
    str, StringConstraints(min_length=1, max_length=L.MAX_NAME_LEN, pattern=r"^[a-z0-9][a-z0-9_.-]*$")
]
FieldName = Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_METADATA_KEY_LEN)]


class ExclusionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    proxy_score_threshold: float = Field(
        0.8,
        allow_inf_nan=False,
        description="without labels, candidates scoring at least this are proxy gold; retriever scores are "
        "not comparable across apps (cosine, BM25, RRF), so calibrate it on a labelled sample",
    )
    proxy_top_k: int = Field(3, ge=1, le=L.MAX_GOLD_IDS, description="at most this many proxy gold documents")
    label_wait_ttl_s: int = Field(
        86_400,
        ge=60,
        le=L.MAX_EVENT_AGE_S,
        description="how long a trace's evaluation waits in Redis for a late label (about 1.8 KiB per "
        "sampled trace with 50 candidates and 8 context documents, ranked ids included), and a label for its trace",
    )
    intents: list[IntentName] = Field(
        default_factory=lambda: list(L.DEFAULT_INTENTS),
        description="intent label values; others are 'other' (as metrics.intents: the per-intent guardrails "
        "join on them)",
    )
    predicate_fields: list[FieldName] = Field(
        default_factory=list, description="metadata fields always kept as the `field` label of attributions"
    )
    max_extra_predicate_fields: int = Field(
        16,
        ge=0,
        le=256,
        description="further fields kept per tenant, first seen first kept; the rest are 'other'",
    )
    max_variants: int = Field(
        8, ge=1, le=64, description="variant label values live per tenant besides production"
    )
    variant_window_s: float = Field(
        3 * 24 * 3600.0,
        gt=0,
        description="a variant stays a label value while samples named it this recently; then its series are "
        "removed (docs/series-budget.md)",
    )
    retrieval_ks: list[int] = Field(
        default_factory=lambda: [5, 10],
        min_length=1,
        max_length=4,
        description="cut-offs k of the online retrieval metrics (Hit, Recall, Precision, nDCG @k; "
        "docs/retrieval-metrics.md): each k adds 8 counter series per tenant, variant and intent",
    )

    @field_validator("retrieval_ks")
    @classmethod
    def _ks(cls, v: list[int]) -> list[int]:
        if any(k < 1 or k > L.MAX_DOCUMENTS for k in v):
            raise ValueError(f"each k must be between 1 and {L.MAX_DOCUMENTS}, got {v}")
        if len(set(v)) != len(v):
            raise ValueError(f"k values must be distinct, got {v}")
        return sorted(v)


def load_exclusion_config(path: str | os.PathLike[str] | None = None) -> ExclusionConfig:
    return load_section("exclusion", ExclusionConfig, path)
