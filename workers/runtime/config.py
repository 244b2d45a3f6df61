"""The one way a worker reads its configuration (`WorkerSpec.config`, handed to build as `ctx.config`).

A worker's config is one pydantic model, read once at start by the entry point
(workers/runtime/app.py): a plain model is the config file's section named
after the worker (RAGMON_CONFIG, `service.contracts.config.load_section`); a
pydantic-settings model (phoenix, forwarder) is read from its environment
variables. A model may add the checks that need the whole value (a URL that
must be set for this worker to start) in `check_startup()`. Whatever is wrong
is one ConfigError naming the section and field or the variable.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, cast, runtime_checkable

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings

from service.contracts.config import ConfigError, load_section
from service.contracts.settings import describe_settings_error

C = TypeVar("C", bound=BaseModel)


@runtime_checkable
class StartupCheck(Protocol):
    def check_startup(self) -> None:
        """Raise ConfigError when this (valid) configuration cannot start the worker, saying how to fix it."""
        ...


class NoConfig(BaseModel):
    """For a worker with no settings of its own (a test probe): an empty section."""

    model_config = {"extra": "forbid"}


def load_worker_config(section: str, model: type[C]) -> C:
    """The worker's config, validated and checked; ConfigError naming what to fix."""
    config = (
        cast(C, _from_environment(section, model)) if _is_settings(model) else load_section(section, model)
    )
    if isinstance(config, StartupCheck):
        config.check_startup()
    return config


def _is_settings(model: type[BaseModel]) -> bool:
    return issubclass(model, BaseSettings)


def _from_environment(section: str, model: type[BaseModel]) -> BaseModel:
    try:
        return model()
    except ValidationError as exc:
        prefix = str(model.model_config.get("env_prefix", "RAGMON_"))
        problems = describe_settings_error(exc, prefix).removeprefix("invalid settings: ")
        raise ConfigError(f"invalid {section} settings: {problems}") from exc
