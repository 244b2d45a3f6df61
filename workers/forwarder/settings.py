"""Settings of the span forwarder (env prefix RAGMON_FORWARD_); see docs/phoenix.md."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from workers.phoenix.projects import check_one_tenant_per_project, tenant_project
from workers.runtime.collector import CollectorSettings
from workers.runtime.config import load_worker_config


class ForwarderSettings(CollectorSettings):
    model_config = SettingsConfigDict(env_prefix="RAGMON_FORWARD_", extra="ignore")
    worker: ClassVar[str] = "the span forwarder"
    example_endpoint: ClassVar[str] = "http://127.0.0.1:6006/v1/traces"

    endpoint: str = Field(
        "", description="OTLP/HTTP traces URL, e.g. http://phoenix:6006/v1/traces; empty = off"
    )
    project_prefix: str = Field(
        "", description="a tenant not in tenant_projects has the project <prefix><tenant>"
    )
    tenant_projects: dict[str, str] = Field(
        default_factory=dict,
        description="tenant -> Phoenix project (JSON object), set as openinference.project.name "
        "on every resource of the tenant's spans; one tenant per project",
    )

    _one_tenant_per_project = field_validator("tenant_projects")(check_one_tenant_per_project)

    def project_for(self, tenant: str) -> str:
        return tenant_project(tenant, self.tenant_projects, self.project_prefix)

    max_spans_per_request: int = Field(2000, ge=1, le=100_000)


def load_settings() -> ForwarderSettings:
    """The forwarder's settings as its entry point reads them (workers/runtime/config.py)."""
    return load_worker_config("forwarder", ForwarderSettings)
