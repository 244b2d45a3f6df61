"""Settings of the Phoenix exporter (env prefix RAGMON_PHOENIX_); see docs/phoenix.md."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.contracts.config import ConfigError
from workers.phoenix.projects import check_one_tenant_per_project, tenant_project
from workers.runtime.config import load_worker_config

URL_ENV = "RAGMON_PHOENIX_URL"


class PhoenixSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGMON_PHOENIX_", extra="ignore")

    url: str = Field("", description="Phoenix base URL, e.g. http://phoenix:6006; empty = exporter off")
    api_key: SecretStr | None = Field(None, description="sent as 'Authorization: Bearer <key>'")
    project_prefix: str = Field(
        "", description="a tenant not in tenant_projects has the project <prefix><tenant>"
    )
    tenant_projects: dict[str, str] = Field(
        default_factory=dict, description="per-tenant project, JSON object; one tenant per project"
    )
    timeout_s: float = Field(10.0, gt=0, le=300)
    max_annotations_per_request: int = Field(500, ge=1, le=10_000)
    max_traces_per_lookup: int = Field(100, ge=1, le=1000, description="trace ids per span lookup request")
    span_wait_s: float = Field(
        900.0, ge=0, description="how long a score waits for its trace to reach Phoenix before it is dropped"
    )
    retry_interval_s: float = Field(
        10.0, gt=0, description="how often waiting scores look for their trace again"
    )
    max_waiting: int = Field(
        100_000, ge=0, description="waiting scores kept in Redis; beyond that, counted, dropped"
    )
    max_waiting_per_tenant: int = Field(
        20_000,
        ge=0,
        description="waiting scores one tenant may hold of max_waiting; beyond that, its own are dropped",
    )

    _one_tenant_per_project = field_validator("tenant_projects")(check_one_tenant_per_project)

    def project_for(self, tenant: str) -> str:
        """The tenant's own Phoenix project (workers/phoenix/projects.py): scores are matched to traces there."""
        return tenant_project(tenant, self.tenant_projects, self.project_prefix)

    def check_startup(self) -> None:
        """A missing URL fails fast and says how to fix it."""
        if not self.url:
            raise ConfigError(
                f"the phoenix exporter needs {URL_ENV} (e.g. http://127.0.0.1:6006); "
                "without it, do not start this worker (ragmon up skips it)"
            )


def load_settings() -> PhoenixSettings:
    """The exporter's settings as its entry point reads them (workers/runtime/config.py)."""
    return load_worker_config("phoenix", PhoenixSettings)
