"""The whole-request refusal of the ingestion routes (POST /v1/events, POST /v1/traces)."""

from __future__ import annotations

from typing import Any


class IngestError(Exception):
    """A whole-request refusal: status plus a message naming the field and the rule."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        field: str | None = None,
        rule: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.rule = rule
        self.headers = headers  # of the answer: Retry-After on a 429

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.message}
        if self.field:
            out["field"] = self.field
        if self.rule:
            out["rule"] = self.rule
        return out
