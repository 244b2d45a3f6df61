"""Section `shadow` of the ragmon config file (see docs/shadow.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from service.contracts.config import load_section

DEFAULT_INTENTS = ["billing", "troubleshooting", "product_info", "account", "policy"]
DEFAULT_STAGES = ["retrieval", "rerank", "generation"]


class ShadowConfig(BaseModel):
    model_config = {"extra": "forbid"}
    key_prefix: str = "ragmon:shadow"
    pair_wait_s: int = Field(
        900, ge=1, description="how long a trace waits for its twin before it stays unpaired"
    )
    keep_s: int = Field(7 * 24 * 3600, ge=60, description="how long a paired request's outcomes are kept")
    window_pairs: int = Field(20_000, ge=100, description="the most recent pairs the statistics run on")
    recompute_every_pairs: int = Field(200, ge=1)
    recompute_every_s: float = Field(30.0, gt=0)
    lease_s: float = Field(60.0, gt=0)
    max_candidates_per_tenant: int = Field(
        8,
        ge=1,
        le=64,
        description="candidates per tenant at once (label cardinality); events of more are refused",
    )
    candidate_window_s: float = Field(
        3 * 24 * 3600,
        gt=0,
        description="a candidate with no event for this long leaves: its state and series are removed "
        "and its place under max_candidates_per_tenant is free (docs/series-budget.md)",
    )
    candidate_sweep_s: float = Field(60.0, gt=0, description="how often candidates that left are looked for")
    intents: list[str] = Field(default_factory=lambda: list(DEFAULT_INTENTS))
    stages: list[str] = Field(default_factory=lambda: list(DEFAULT_STAGES))
    slice_fields: dict[str, list[str]] = Field(
        default_factory=dict,
        description="metadata field -> its label values (a closed set), from relevance "
        "filter predicates 'field eq value' of the production trace",
    )
    expected_shadow_rate: dict[str, float] = Field(
        default_factory=dict, description="candidate -> share of production requests it should shadow"
    )
    coverage_alpha: float = Field(
        0.001,
        gt=0,
        lt=1,
        description="coverage is reported far from "
        "expected_shadow_rate when the rate lies outside its exact binomial interval at "
        "confidence 1 - coverage_alpha (read continuously, hence small)",
    )
    margins: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="metric -> equivalence margin (superiority metrics: absolute units; "
        "latency, cost, tokens: a share of the production mean), overriding "
        "the defaults of docs/shadow.md",
    )
    effects: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="metric -> the effect of interest the power report sizes pairs for "
        "(same units as margins; default 0.05)",
    )
    alpha: float = Field(0.05, gt=0, lt=1)
    min_pairs: int = Field(30, ge=2)
    resamples: int = Field(2_000, ge=100, le=100_000)
    tight_at: int = Field(1_000, ge=10)
    latency_samples: int = Field(
        5_000, ge=100, description="production latencies kept, before and during shadowing"
    )
    active_s: float = Field(
        300.0, gt=0, description="a candidate counts as running this long after its last trace"
    )


def load_shadow_config() -> ShadowConfig:
    return load_section("shadow", ShadowConfig)
