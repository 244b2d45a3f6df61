"""Settings of the span forwarder (env prefix RAGMON_FORWARD_); see docs/phoenix.md."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.contracts.config import ConfigError
from workers.phoenix.projects import check_one_tenant_per_project, tenant_project
from workers.runtime.config import load_worker_config
from workers.runtime.headers import header_map

ENDPOINT_ENV = "RAGMON_FORWARD_ENDPOINT"


class ForwarderSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGMON_FORWARD_", extra="ignore")

    endpoint: str = Field(
        "", description="OTLP/HTTP traces URL, e.g. http://phoenix:6006/v1/traces; empty = off"
    )
    headers: SecretStr = Field(
        SecretStr(""),
        description="'k=v,k2=v2' like OTEL_EXPORTER_OTLP_HEADERS "
        "(values URL-encoded), e.g. Authorization=Bearer%20<key>",
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

    timeout_s: float = Field(10.0, gt=0, le=300)
    max_spans_per_request: int = Field(2000, ge=1, le=100_000)
    max_bytes_per_request: int = Field(4 * 1024 * 1024, ge=1024, description="before compression")
    gzip: bool = True

    def check_startup(self) -> None:
        if not self.endpoint:
            raise ConfigError(
                f"the span forwarder needs {ENDPOINT_ENV} (e.g. http://127.0.0.1:6006/v1/traces); "
                "without it, do not start this worker (ragmon up skips it)"
            )
        self.header_map()  # fail fast on a malformed header list

    def header_map(self) -> dict[str, str]:
        return header_map(self.headers.get_secret_value(), "RAGMON_FORWARD_HEADERS")


def load_settings() -> ForwarderSettings:
    """The forwarder's settings as its entry point reads them (workers/runtime/config.py)."""
    return load_worker_config("forwarder", ForwarderSettings)
