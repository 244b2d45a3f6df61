"""Closed label sets for Prometheus: free-form names collapse to 'other'.

Labels come only from closed sets (docs/conventions.md, "Labels"): tenants come
from the API key configuration, stages and intents from configured lists, and
variants are capped per tenant at a configured count (first come, first kept).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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


class Children:
    """Cached metric children by label values.

    prometheus_client's labels() validates and takes a lock on every call;
    a worker calls it a dozen times per event. Label values come from closed
    sets, so the cache stays small. Do not use it for a metric whose series
    are removed (remove() would leave a stale child here).
    """

    def __init__(self) -> None:
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def __call__(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child
