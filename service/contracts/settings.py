"""Settings every ragmon process shares: where Kafka, Redis and the review store are."""

from __future__ import annotations

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.contracts.errors import error_location
from service.contracts.topics import Topics


class CommonSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGMON_", extra="ignore")

    kafka_bootstrap_servers: str = Field(
        "127.0.0.1:9092", description="host:port[,host:port] of the Kafka-protocol brokers"
    )
    kafka_topic_prefix: str = Field("ragmon", pattern=r"^[A-Za-z0-9._-]+$")
    kafka_partitions: int = Field(
        4, ge=1, le=1024, description="partitions per topic when ragmon creates them"
    )
    redis_url: str = Field("redis://127.0.0.1:6379/0", description="Redis for dedupe keys, joins and windows")
    database_url: str | None = Field(
        None, description="PostgreSQL of the review store (review worker, /review); `ragmon up` starts one"
    )

    @property
    def topics(self) -> Topics:
        return Topics(self.kafka_topic_prefix)

    @property
    def bootstrap_list(self) -> list[str]:
        return [s.strip() for s in self.kafka_bootstrap_servers.split(",") if s.strip()]


def describe_settings_error(exc: ValidationError, prefix: str = "RAGMON_", what: str = "settings") -> str:
    """One line per problem, naming the environment variable to fix (`RAGMON_API_PORT: ...`).

    `prefix` is the settings class's env_prefix; `what` names the settings in the first words.
    """
    lines = []
    for err in exc.errors(include_url=False):
        loc = list(err["loc"])
        variable = f"{prefix}{str(loc[0]).upper()}" if loc else "settings"
        where = error_location(variable, loc[1:])
        message = str(err["msg"]).removeprefix("Value error, ")
        lines.append(message if message.startswith(variable) else f"{where}: {message}")
    return f"invalid {what}: " + "; ".join(lines)
