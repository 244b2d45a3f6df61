"""Section `review` of the ragmon config file: what the sampler queues and how much per day."""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from service.contracts import driftflags

Stratum = Literal["blind", "low_confidence", "negative_feedback", "drift", "failed_check"]
STRATA: tuple[Stratum, ...] = ("blind", "low_confidence", "negative_feedback", "drift", "failed_check")
Rate = Annotated[float, Field(gt=0, le=1)]  # the share of a stratum's candidates that is queued


def _default_shares() -> dict[Stratum, float]:
    return {
        "blind": 0.4,
        "low_confidence": 0.25,
        "negative_feedback": 0.2,
        "drift": 0.1,
        "failed_check": 0.05,
    }


class ReviewConfig(BaseModel):
    model_config = {"extra": "forbid"}
    capacity_per_day: int = Field(200, ge=1, description="items queued per tenant per UTC day, all strata")
    tenant_capacity: dict[str, int] = Field(default_factory=dict, description="per-tenant overrides")
    shares: dict[Stratum, float] = Field(
        default_factory=_default_shares, description="share of the daily capacity per stratum (sum <= 1)"
    )
    blind_rate: Rate = Field(0.01, description="share of production traces in the blind sample")
    low_confidence_rate: Rate = Field(1.0, description="share of low-confidence traces queued")
    negative_feedback_rate: Rate = Field(1.0, description="share of thumbs-down/regenerated traces")
    drift_rate: Rate = Field(
        0.05, description="share of the traces of a flagged query-drift window queued (stratum drift)"
    )
    drift_key_prefix: str = Field(
        driftflags.DEFAULT_PREFIX,
        pattern=r"^[A-Za-z0-9:._-]+$",
        description="the drift worker's key_prefix, where its flagged windows are",
    )
    drift_flag_max_age_s: float = Field(
        6 * 3600.0, gt=0, description="a drift flag no test confirmed for this long is ignored"
    )
    drift_refresh_s: float = Field(
        5.0, ge=0, description="how often the flagged windows are re-read from Redis"
    )
    failed_check_rate: Rate = Field(
        1.0,
        description="share of the answers a deterministic check failed that are queued (stratum failed_check)",
    )
    short_dwell_s: float = Field(
        10.0, gt=0, description="a dwell under this many seconds is the implicit signal short_dwell"
    )
    near_margin: float = Field(0.05, ge=0, le=1, description="scores below threshold + margin are 'near'")
    double_review_share: float = Field(0.1, ge=0, le=1, description="items given to a second reviewer")
    stash_ttl_s: int = Field(
        1800, ge=60, description="how long a trace waits in Redis for its score or feedback"
    )
    refresh_s: float = Field(15.0, gt=0, description="how often queue gauges are read from PostgreSQL")

    @field_validator("shares")
    @classmethod
    def _shares_fit(cls, shares: dict[Stratum, float]) -> dict[Stratum, float]:
        total = sum(shares.values())
        if total > 1.0 + 1e-9:
            raise ValueError(f"shares add up to {total:.3f}; they split one daily capacity, so at most 1")
        if any(v < 0 for v in shares.values()):
            raise ValueError("shares must be non-negative")
        return shares

    def quota(self, tenant: str, stratum: Stratum) -> int:
        capacity = self.tenant_capacity.get(tenant, self.capacity_per_day)
        return int(capacity * self.shares.get(stratum, 0.0))

    @property
    def policy_version(self) -> str:
        """Names the sampling policy an item was queued under (changes when this section changes)."""
        return "review-" + hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]


def config_version(text: str) -> str:
    return "config-" + hashlib.sha256(text.encode()).hexdigest()[:12] if text else "config-default"
