"""Settings of the evaluation exporter (env prefix RAGMON_EVALUATIONS_); see docs/otlp.md."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.contracts.config import ConfigError
from workers.runtime.config import load_worker_config
from workers.runtime.headers import header_map

ENDPOINT_ENV = "RAGMON_EVALUATIONS_ENDPOINT"
HEADERS_ENV = "RAGMON_EVALUATIONS_HEADERS"


class EvaluationsSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGMON_EVALUATIONS_", extra="ignore")

    endpoint: str = Field(
        "", description="OTLP/HTTP logs URL, e.g. http://otel-collector:4318/v1/logs; empty = off"
    )
    headers: SecretStr = Field(
        SecretStr(""),
        description="'k=v,k2=v2' like OTEL_EXPORTER_OTLP_HEADERS "
        "(values URL-encoded), e.g. Authorization=Bearer%20<key>",
    )
    service_name: str = Field("ragmon", min_length=1, description="the resource's service.name")
    include_text: bool = Field(
        True,
        description="unsupported sentences' (redacted) text in gen_ai.evaluation.explanation; "
        "false: only their index and score",
    )
    root_spans: bool = Field(
        True,
        description="read the spans topic too and name each OTLP trace's root span in span_id; "
        "false: records carry the trace id only",
    )
    checks: bool = Field(
        True,
        description="read the traces topic too and publish each deterministic answer check's outcome "
        "(the config file's `checks` section)",
    )
    root_span_ttl_s: int = Field(
        86_400, ge=60, description="how long a root span id is kept in Redis (longer than scoring takes)"
    )
    timeout_s: float = Field(10.0, gt=0, le=300)
    max_records_per_request: int = Field(1000, ge=1, le=100_000)
    max_bytes_per_request: int = Field(4 * 1024 * 1024, ge=1024, description="before compression")
    gzip: bool = True

    def check_startup(self) -> None:
        if not self.endpoint:
            raise ConfigError(
                f"the evaluation exporter needs {ENDPOINT_ENV} (e.g. http://127.0.0.1:4318/v1/logs); "
                "without it, do not start this worker (ragmon up skips it)"
            )
        self.header_map()  # fail fast on a malformed header list

    def header_map(self) -> dict[str, str]:
        return header_map(self.headers.get_secret_value(), HEADERS_ENV)


def load_settings() -> EvaluationsSettings:
    """The exporter's settings as its entry point reads them (workers/runtime/config.py)."""
    return load_worker_config("evaluations", EvaluationsSettings)
