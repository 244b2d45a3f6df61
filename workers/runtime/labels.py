"""Closed label sets for Prometheus: free-form names collapse to 'other'.

Labels come only from closed sets (CONVENTIONS.md): tenants come from the API
key configuration, stages and intents from configured lists, and variants are
capped per tenant at a configured count (first come, first kept).
"""

from __future__ import annotations

from collections.abc import Iterable

OTHER = "other"
NONE = "none"


class ClosedSet:
    """Maps a name to itself when it is in the configured set, else to 'other'."""

    def __init__(self, allowed: Iterable[str], missing: str = NONE) -> None:
        self.allowed = frozenset(allowed)
        self.missing = missing

    def __call__(self, name: str | None) -> str:
        if not name:
            return self.missing
        return name if name in self.allowed else OTHER


class FirstSeenCap:
    """Keeps the first `limit` distinct names per scope; later ones become 'other'.

    Used for variants: an app has a handful (production plus candidates), but
    nothing stops a client from sending a new name on every request.
    """

    def __init__(self, limit: int, always: Iterable[str] = ("production",)) -> None:
        self.limit = limit
        self.always = frozenset(always)
        self._seen: dict[str, set[str]] = {}

    def __call__(self, scope: str, name: str) -> str:
        if name in self.always:
            return name
        seen = self._seen.setdefault(scope, set())
        if name in seen:
            return name
        if len(seen) < self.limit:
            seen.add(name)
            return name
        return OTHER
