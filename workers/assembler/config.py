"""Section `assembler` of the ragmon config file (docs/otlp.md, "The assembler worker")."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator


class AssemblerConfig(BaseModel):
    model_config = {"extra": "forbid"}
    quiet_period_s: float = Field(
        5.0, ge=0, description="wait after a trace's last span before assembling it"
    )
    root_wait_s: float = Field(
        300.0, gt=0, description="how long spans wait for their root span; then dropped"
    )
    max_spans_per_trace: int = Field(
        5_000, ge=1, description="spans kept per trace; more are counted as overflow"
    )
    max_bytes_per_trace: int = Field(8 * 1024 * 1024, ge=1024, description="bytes of spans kept per trace")
    max_logs_per_trace: int = Field(
        2_000, ge=1, description="log records (POST /v1/logs) kept per trace; more are counted as overflow"
    )
    max_log_bytes_per_trace: int = Field(
        4 * 1024 * 1024, ge=1024, description="bytes of log records kept per trace, apart from its spans'"
    )
    state_ttl_s: int = Field(3_600, ge=60, description="an open trace's Redis keys expire after this")
    done_ttl_s: int = Field(
        24 * 3_600, ge=60, description="how long late spans of a finished trace are recognised"
    )
    claim_lease_s: float = Field(
        60.0, gt=0, description="a claimed trace is due again after this if not finished"
    )
    max_traces_per_tick: int = Field(500, ge=1, le=10_000)
    key_prefix: str = Field("ragmon:asm", min_length=1)

    @model_validator(mode="after")
    def _state_outlives_the_wait(self) -> AssemblerConfig:
        if self.state_ttl_s <= self.root_wait_s + self.quiet_period_s:
            raise ValueError(
                f"state_ttl_s ({self.state_ttl_s}) must exceed root_wait_s + quiet_period_s "
                f"({self.root_wait_s + self.quiet_period_s:g}), or spans expire before their root"
            )
        return self
