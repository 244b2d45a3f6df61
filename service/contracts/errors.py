"""How a pydantic validation error is written for people: one format for the API and the workers.

A location is written the way a client addresses the field in its JSON
(`events[3].body.retrieval.documents[0].text`), followed by the message and
pydantic's error type, which names the rule (`greater_than`, `missing`, …).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError


def error_location(prefix: str, loc: Sequence[int | str]) -> str:
    """`prefix` followed by the path: list indexes in brackets, field names after dots."""
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    return (prefix + path).lstrip(".")


def describe_errors(prefix: str, exc: ValidationError, limit: int = 5, rule: bool = True) -> str:
    """The first `limit` errors, `location: message (rule)`, joined by '; ', with how many were left out."""
    parts = []
    for err in exc.errors(include_url=False)[:limit]:
        text = f"{error_location(prefix, err['loc'])}: {err['msg']}"
        parts.append(f"{text} ({err['type']})" if rule else text)
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
