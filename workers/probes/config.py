"""Section `probes` of the ragmon config file: how probe results are compared (docs/probes.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from service.contracts.neighbours import DEFAULT_K, DEFAULT_RBO_P


class ProbesConfig(BaseModel):
    model_config = {"extra": "forbid"}
    k: int = Field(DEFAULT_K, ge=1, le=100, description="depth of overlap@k, RBO and gold recall@k")
    rbo_p: float = Field(DEFAULT_RBO_P, gt=0, lt=1, description="RBO persistence: weight of deeper ranks")
    declare_grace_s: float = Field(
        600.0,
        ge=0,
        description="a release up to this long after a version's first probe result still declares it",
    )
    declare_window_s: float = Field(
        86400.0,
        gt=0,
        description="a release at most this long before a version's first probe result declares it",
    )
    max_sets_per_tenant: int = Field(
        5, ge=1, le=50, description="probe sets of a tenant exported as series (first seen kept)"
    )
