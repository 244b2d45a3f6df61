"""The `faithfulness` section of the ragmon config file (RAGMON_CONFIG).

Everything that changes what a score means (model, mode, thresholds, premise
budget) or what it costs (sampling, pairs per second, batch shape) is here, so
the score events and metrics can be traced back to one validated section.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from service.contracts.config import load_section
from service.contracts.vocabulary import DEFAULT_INTENTS

SECTION = "faithfulness"
HHEM_HUB_ID = "vectara/hallucination_evaluation_model"

TenantName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.-]*$")]
IntentName = TenantName  # the same label-value rule
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class FaithfulnessConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(
        HHEM_HUB_ID,
        min_length=1,
        description="HHEM-2.1-Open checkpoint: a local directory (config.json + *.safetensors) or a hub id",
    )
    model_revision: str | None = Field(
        None, min_length=1, description="hub revision (tag or commit) to pin when `model` is a hub id"
    )
    foundation: str | None = Field(
        None,
        min_length=1,
        description="foundation model (T5 config.json + tokenizer.json): a local directory or hub id; "
        "default: the `foundation` named in the checkpoint's config.json (google/flan-t5-base)",
    )
    mode: Literal["answer", "sentences"] = Field(
        "answer", description="answer: one pair per trace; sentences: one pair per answer sentence"
    )
    threshold: Probability = Field(
        0.5, description="HHEM score at or above which a pair counts as supported (calibrate on human labels)"
    )
    tenant_thresholds: dict[TenantName, Probability] = Field(default_factory=dict)
    min_supported_fraction: Probability = Field(
        1.0,
        description="sentences mode: a trace is below threshold when its supported-sentence fraction is under this",
    )
    premise_token_budget: int = Field(
        1024, ge=16, le=16_384, description="tokens of document text per premise"
    )
    max_hypothesis_tokens: int = Field(
        512, ge=8, le=8_192, description="longer answers (or sentences) are skipped, not truncated"
    )
    sample_rate: Probability = Field(
        0.1, description="share of request ids scored, decided by a hash of the id"
    )
    tenant_sample_rates: dict[TenantName, Probability] = Field(default_factory=dict)
    failed_checks: Literal["first", "skip"] = Field(
        "first",
        description="answers that fail a deterministic check (docs/checks.md): first, planned before the rest "
        "of their batch, so the pairs budget goes to them first; skip, not scored (already known bad)",
    )
    pairs_per_second: float = Field(
        2.0,
        gt=0,
        le=10_000,
        allow_inf_nan=False,
        description="scoring budget per worker, an equal share of it to each tenant asking (what the others "
        "leave is used); about half of what 2 CPU cores score on simulator-sized pairs "
        "(tests/bench/reports/faithfulness.md), leaving room for longer premises",
    )
    burst_seconds: float = Field(
        30.0, gt=0, le=3_600, allow_inf_nan=False, description="budget a quiet spell can bank"
    )
    cache_size: int = Field(
        4096, ge=0, le=1_000_000, description="scores of identical (premise, hypothesis) pairs kept"
    )
    batch_size: int = Field(16, ge=1, le=1024, description="most pairs in one forward pass")
    batch_tokens: int = Field(2048, ge=64, le=1_048_576, description="most padded tokens in one forward pass")
    device: str = Field("cpu", pattern=r"^(cpu|cuda(:[0-9]+)?|mps)$")
    matmul: Literal["auto", "torch"] = Field(
        "auto",
        description="auto: prepacked oneDNN products on CPU when they pass a load-time check; torch: F.linear",
    )
    load_retry_seconds: float = Field(60.0, gt=0, le=86_400, allow_inf_nan=False)
    max_variants: int = Field(
        8, ge=1, le=64, description="variant label values live per tenant besides production"
    )
    variant_window_s: float = Field(
        3 * 24 * 3600.0,
        gt=0,
        allow_inf_nan=False,
        description="a variant stays a label value while traces named it this recently; then its series are "
        "removed (docs/series-budget.md)",
    )
    intents: tuple[IntentName, ...] = Field(
        DEFAULT_INTENTS,
        description="the intent label's closed set (others are 'other', none is 'none'); as metrics.intents, "
        "so the per-intent faithfulness guardrail joins on the same values",
    )

    def threshold_for(self, tenant: str) -> float:
        return self.tenant_thresholds.get(tenant, self.threshold)

    def sample_rate_for(self, tenant: str) -> float:
        return self.tenant_sample_rates.get(tenant, self.sample_rate)

    def configured_tenants(self) -> set[str]:
        """Tenants with settings of their own."""
        return set(self.tenant_thresholds) | set(self.tenant_sample_rates)


def load_config(path: str | None = None) -> FaithfulnessConfig:
    return load_section(SECTION, FaithfulnessConfig, path)
