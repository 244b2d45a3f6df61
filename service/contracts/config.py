"""The ragmon YAML configuration file (RAGMON_CONFIG), read one section at a time.

Each process validates the sections it uses at start, so a bad threshold fails
fast with the section and field named, instead of deep inside a worker.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from service.contracts.errors import describe_errors

M = TypeVar("M", bound=BaseModel)

CONFIG_ENV = "RAGMON_CONFIG"


class ConfigError(RuntimeError):
    pass


def load_config_file(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The whole file as a mapping; {} when no file is configured."""
    path = path if path is not None else os.environ.get(CONFIG_ENV)
    if not path:
        return {}
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"{CONFIG_ENV}={str(p)!r}: no such file; point it at a ragmon YAML config or unset it"
        )
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of sections")
    return data


def load_section(name: str, model: type[M], path: str | os.PathLike[str] | None = None) -> M:
    """Validate section `name` of the config file with `model` (defaults when absent)."""
    raw = load_config_file(path).get(name) or {}
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = describe_errors(name, exc, limit=10, rule=False)
        raise ConfigError(f"invalid ragmon config: {problems}") from exc
