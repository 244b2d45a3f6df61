"""Section `checks` of the ragmon config file: bounds, locales, forbidden patterns and response schemas."""

from __future__ import annotations

from typing import Annotated, Any

import re2
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, model_validator

from workers.checks.schema import Compiled, SchemaError, compile_schema

Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$", min_length=1, max_length=64)]
Locale = Annotated[str, StringConstraints(pattern=r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")]


class ForbiddenPattern(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name = Field(description="names the pattern in logs and on the review page")
    pattern: Annotated[str, StringConstraints(min_length=1, max_length=2000)] = Field(
        description="an RE2 regular expression (no backreferences or lookarounds): linear time on any answer"
    )


class ChecksConfig(BaseModel):
    """docs/checks.md has what each check catches."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    min_answer_chars: int = Field(
        1, ge=0, description="a non-refused answer shorter than this fails answer_length"
    )
    max_answer_chars: int = Field(4000, ge=1, description="a longer answer fails answer_length")
    locale: Locale = Field("en", description="how figures are written: the decimal mark of this language")
    tenant_locales: dict[str, Locale] = Field(default_factory=dict, description="per-tenant locale")
    forbidden: Annotated[list[ForbiddenPattern], Field(max_length=100)] = Field(
        default_factory=list, description="patterns no answer may contain (internal host names, PII)"
    )
    schemas: dict[Name, dict[str, Any]] = Field(
        default_factory=dict, description="JSON Schemas (the subset of workers/checks/schema.py) by name"
    )
    _forbidden: list[tuple[str, Any]] = PrivateAttr(default_factory=list)
    _schemas: dict[str, Compiled] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _compile(self) -> ChecksConfig:
        if self.min_answer_chars > self.max_answer_chars:
            raise ValueError("min_answer_chars is over max_answer_chars")
        compiled = []
        for i, f in enumerate(self.forbidden):
            try:
                compiled.append((f.name, re2.compile(f.pattern)))
            except Exception as exc:  # re2.error
                raise ValueError(f"forbidden.{i}.pattern: RE2 cannot compile {f.pattern!r}: {exc}") from exc
        schemas = {}
        for name, schema in self.schemas.items():
            try:
                schemas[name] = compile_schema(schema)
            except SchemaError as exc:
                raise ValueError(f"schemas.{name}{exc}") from exc
        self._forbidden, self._schemas = compiled, schemas
        return self

    def locale_for(self, tenant: str) -> str:
        return self.tenant_locales.get(tenant, self.locale)

    @property
    def forbidden_compiled(self) -> list[tuple[str, Any]]:
        return self._forbidden

    def compiled_schema(self, name: str) -> Compiled | None:
        return self._schemas.get(name)
