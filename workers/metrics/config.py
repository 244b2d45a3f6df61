"""Section `metrics` of the ragmon config file."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from service.contracts import TOKEN_KINDS
from service.contracts.vocabulary import DEFAULT_INTENTS as _INTENTS

DEFAULT_STAGES = ["embedding", "retrieval", "rerank", "generation", "postprocess"]
DEFAULT_INTENTS = list(_INTENTS)


class ModelPrice(BaseModel):
    """USD per million tokens, by token kind; kinds without a price make the cost unknown."""

    model_config = {"extra": "forbid"}
    prompt: float | None = Field(None, ge=0)
    completion: float | None = Field(None, ge=0)
    cached_prompt: float | None = Field(None, ge=0)
    reasoning: float | None = Field(None, ge=0)
    embedding: float | None = Field(None, ge=0)
    rerank: float | None = Field(None, ge=0)


class MetricsConfig(BaseModel):
    model_config = {"extra": "forbid"}
    stages: list[str] = Field(default_factory=lambda: list(DEFAULT_STAGES))
    intents: list[str] = Field(default_factory=lambda: list(DEFAULT_INTENTS))
    max_variants_per_tenant: int = Field(
        8,
        ge=1,
        le=64,
        description="variant label values live per tenant besides production (docs/series-budget.md)",
    )
    variant_window_s: float = Field(
        3 * 24 * 3600.0,
        gt=0,
        description="a variant stays a label value while traces named it this recently; then its series are removed",
    )
    max_releases_per_tenant: int = Field(
        6,
        ge=1,
        le=200,
        description="release label values live per tenant (the current ones per variant and the previous ones)",
    )
    release_window_s: float = Field(
        7 * 24 * 3600.0,
        gt=0,
        description="a release stays a label value while traces or markers named it this recently",
    )
    series_sweep_s: float = Field(
        60.0,
        gt=0,
        description="how often the worker removes the series of variants and releases that left the window",
    )
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    join_ttl_s: int = Field(24 * 3600, ge=60, description="how long a trace's join info waits for feedback")
    park_s: int = Field(900, ge=1, description="how long feedback waits for its trace before it is unjoined")
    release_refresh_s: float = Field(
        5.0, gt=0, description="how often a replica re-reads release markers and re-checks its release labels"
    )
    change_min_traces: int = Field(
        200, ge=10, description="change detection: a window holds at least this many production traces"
    )
    change_window_s: float = Field(600.0, gt=0, description="change detection: and spans at least this long")
    change_enter_share: float = Field(
        0.6, gt=0.5, lt=1, description="change detection: a new value holds more than this share of a window"
    )
    change_exit_share: float = Field(
        0.4, gt=0, lt=0.5, description="change detection: while the established value fell below this share"
    )
    change_max_values: int = Field(
        8,
        ge=2,
        le=64,
        description="change detection: distinct values counted per tenant, component and window",
    )

    @field_validator("stages")
    @classmethod
    def _no_reserved(cls, v: list[str]) -> list[str]:
        reserved = {"ttft", "total", "other"}
        clash = reserved.intersection(v)
        if clash:
            raise ValueError(
                f"stage names {sorted(clash)} are reserved (ttft and total have their own series)"
            )
        return v

    @field_validator("prices")
    @classmethod
    def _known_kinds(cls, v: dict[str, ModelPrice]) -> dict[str, ModelPrice]:
        assert set(ModelPrice.model_fields) == set(TOKEN_KINDS)
        return v
