"""Closed label sets for Prometheus: free-form names collapse to 'other'.

Labels come only from closed sets (docs/conventions.md, "Labels"): tenants come
from the API key configuration, stages and intents from configured lists, and
variants are capped per tenant at a configured count (first come, first kept,
or, with WindowedCap, the most recently seen within a window: values that left
the window are evicted and their series removed, docs/series-budget.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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


class WindowedCap:
    """At most `limit` live values of one label per scope (a tenant); a value is live while seen within
    `window_s`.

    A new value while the scope has `limit` live ones becomes 'other' (and `on_fold(scope)` is called,
    the folded counter) until one of them ages out. `expire(now)` forgets the values not seen for the
    window and returns them as (scope, value), so their series can be removed (prune()). Values in
    `always` are never capped, never expired (production, none, other). Memory: at most `limit` values
    per scope.
    """

    def __init__(
        self,
        limit: int,
        window_s: float,
        always: Iterable[str] = (),
        on_fold: Callable[[str], None] | None = None,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.always = frozenset(always) | {OTHER}
        self.on_fold = on_fold
        self._seen: dict[str, dict[str, float]] = {}  # scope -> value -> last seen

    def __call__(self, scope: str, name: str, now: float) -> str:
        if name in self.always:
            return name
        seen = self._seen.get(scope)
        if seen is None:
            seen = self._seen[scope] = {}
        if name in seen or len(seen) < self.limit:
            seen[name] = max(now, seen.get(name, now))
            return name
        if self.on_fold is not None:
            self.on_fold(scope)
        return OTHER

    def force(self, scope: str, name: str, now: float) -> str | None:
        """Make `name` live even at the cap (a release marker is authoritative): the least recently seen
        value makes room and is returned, forgotten, so its series can be removed."""
        if name in self.always:
            return None
        seen = self._seen.setdefault(scope, {})
        displaced = None
        if name not in seen and len(seen) >= self.limit:
            displaced = min(seen, key=seen.__getitem__)
            del seen[displaced]
        seen[name] = max(now, seen.get(name, now))
        return displaced

    def live(self, scope: str) -> list[str]:
        return sorted(self._seen.get(scope, ()))

    def expire(self, now: float) -> list[tuple[str, str]]:
        """The (scope, value) pairs last seen before now - window_s, forgotten."""
        oldest = now - self.window_s
        gone: list[tuple[str, str]] = []
        for scope, seen in list(self._seen.items()):
            for name in [n for n, ts in seen.items() if ts < oldest]:
                del seen[name]
                gone.append((scope, name))
            if not seen:
                del self._seen[scope]
        return gone


class Children:
    """Cached metric children by label values.

    prometheus_client's labels() validates and takes a lock on every call;
    a worker calls it a dozen times per event. Label values come from closed
    or capped sets, so the cache stays small. Series are removed through
    remove() (prune()), which drops the cached child too: a stale child here
    would keep counting into a series nobody exports. The children are also
    indexed by their first label value (the tenant), so removing one tenant's
    value costs that tenant's series, not every tenant's: a family pruned this
    way must create all its series through the cache.
    """

    def __init__(self) -> None:
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._by_first: dict[tuple[int, str], list[tuple[str, ...]]] = {}

    def __call__(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
            self._by_first.setdefault((id(metric), labels[0] if labels else ""), []).append(labels)
        return child

    def remove(self, metric: Any, match: dict[str, str]) -> None:
        """Remove the series of `metric` whose labels include `match` (which names its first label), and
        their cached children."""
        names: tuple[str, ...] = metric._labelnames
        positions = [(names.index(k), v) for k, v in match.items()]
        scope = (id(metric), match[names[0]])
        kept = []
        for labels in self._by_first.get(scope, ()):
            if all(labels[i] == v for i, v in positions):
                metric.remove(*labels)
                del self._children[(id(metric), labels)]
            else:
                kept.append(labels)
        if kept:
            self._by_first[scope] = kept
        else:
            self._by_first.pop(scope, None)


class DeferredCounts:
    """Children (as `Children`) whose updates wait: `inc`, `observe`, `set` on a child are kept and applied by
    `apply()`, once the work they count has succeeded. The child itself is created at once (a series
    exported at 0 from its first event stays so).

    A processor counts in process while a batch's Redis work may still fail: the runtime then retries the
    same events (workers/runtime/outage.py), or halves the batch around a poison record, and counts made
    on the failed try would be counted again. Counting into a DeferredCounts and applying it after the
    batch's last Redis call counts each event once.

    It is on the hot path (a dozen updates per event): one wrapper per child and batch, increments summed
    per child (one `inc` each at `apply`), observations kept in order, the last `set` of a child kept.
    """

    __slots__ = ("_children", "_wrappers", "incs", "observed", "sets")

    def __init__(self, children: Children) -> None:
        self._children = children
        self._wrappers: dict[tuple[int, tuple[str, ...]], _DeferredChild] = {}
        self.incs: dict[Any, float] = {}
        self.observed: list[tuple[Any, float]] = []
        self.sets: dict[Any, float] = {}

    def __call__(self, metric: Any, *labels: str) -> _DeferredChild:
        key = (id(metric), labels)
        wrapper = self._wrappers.get(key)
        if wrapper is None:
            wrapper = self._wrappers[key] = _DeferredChild(self._children(metric, *labels), self)
        return wrapper

    def apply(self) -> None:
        incs, observed, sets = self.incs, self.observed, self.sets
        self.incs, self.observed, self.sets, self._wrappers = {}, [], {}, {}
        for child, amount in incs.items():
            child.inc(amount)
        for child, value in observed:
            child.observe(value)
        for child, value in sets.items():
            child.set(value)


class _DeferredChild:
    __slots__ = ("_child", "_owner")

    def __init__(self, child: Any, owner: DeferredCounts) -> None:
        self._child = child
        self._owner = owner

    def inc(self, amount: float = 1.0) -> None:
        incs = self._owner.incs
        incs[self._child] = incs.get(self._child, 0.0) + amount

    def observe(self, value: float) -> None:
        self._owner.observed.append((self._child, value))

    def set(self, value: float) -> None:
        self._owner.sets[self._child] = value


def prune(metrics: Iterable[Any], match: dict[str, str], children: Children | None = None) -> None:
    """Remove every series with the labels in `match` from each metric that has all those labels: the
    registry stops exporting them (a removed counter restarts from 0 if its labels come back, which
    rate() reads as a counter reset). Live series are untouched. With `children`, the series are found
    through its index (the metrics' series all created through it); without, by a scan of the metric."""
    for metric in metrics:
        if not set(match).issubset(metric._labelnames):
            continue
        if children is not None:
            children.remove(metric, match)
        else:
            metric.remove_by_labels(match)


def families_with(metrics: Iterable[Any], label: str, exclude: Iterable[Any] = ()) -> list[Any]:
    """The metric families (of a worker's metrics object's attributes) that carry `label`."""
    skip = {id(m) for m in exclude}
    return [m for m in metrics if label in getattr(m, "_labelnames", ()) and id(m) not in skip]
