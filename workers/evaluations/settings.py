"""Settings of the evaluation exporter (env prefix RAGMON_EVALUATIONS_); see docs/otlp.md."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from workers.runtime.collector import CollectorSettings
from workers.runtime.config import load_worker_config


class EvaluationsSettings(CollectorSettings):
    model_config = SettingsConfigDict(env_prefix="RAGMON_EVALUATIONS_", extra="ignore")
    worker: ClassVar[str] = "the evaluation exporter"
    example_endpoint: ClassVar[str] = "http://127.0.0.1:4318/v1/logs"

    endpoint: str = Field(
        "", description="OTLP/HTTP logs URL, e.g. http://otel-collector:4318/v1/logs; empty = off"
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
    max_records_per_request: int = Field(1000, ge=1, le=100_000)


def load_settings() -> EvaluationsSettings:
    """The exporter's settings as its entry point reads them (workers/runtime/config.py)."""
    return load_worker_config("evaluations", EvaluationsSettings)
