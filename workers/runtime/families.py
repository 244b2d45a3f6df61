"""How a worker declares its Prometheus families: each declaration states only what differs.

A metrics class builds its families through one `Families` bound to its registry, and optionally to the
label names most of its families share; a declaration then gives the name (written out in full,
docs/conventions.md "Metric names"), the help text, the label names where they are not the shared ones,
and a histogram's buckets. `moments` declares the three counters a mean and its interval are derived from.
`at_zero` creates a family's series before their first use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

NameAndHelp = tuple[str, str]


class Families:
    def __init__(self, registry: CollectorRegistry, labels: Sequence[str] = ()) -> None:
        self.registry = registry
        self.labels = tuple(labels)

    def counter(self, name: str, doc: str, labels: Sequence[str] | None = None) -> Counter:
        return Counter(name, doc, self._names(labels), registry=self.registry)

    def gauge(self, name: str, doc: str, labels: Sequence[str] | None = None) -> Gauge:
        return Gauge(name, doc, self._names(labels), registry=self.registry)

    def histogram(
        self, name: str, doc: str, labels: Sequence[str] | None = None, *, buckets: Sequence[float]
    ) -> Histogram:
        return Histogram(name, doc, self._names(labels), buckets=buckets, registry=self.registry)

    def moments(
        self,
        labels: Sequence[str],
        keys: Sequence[str],
        *,
        sums: NameAndHelp,
        squares: NameAndHelp,
        count: NameAndHelp,
    ) -> tuple[Counter, Counter, Counter]:
        """The sum of per-item values, the sum of their squares and the count of items, in that order.

        Each argument is (name written out in full, help text). The sums are labelled `labels` then `keys`
        (an item adds one value per key), the count `labels` only; recording rules derive the mean and a
        normal-approximation interval from the three, so they aggregate across processes.
        """
        by_key = (*labels, *keys)
        return self.counter(*sums, by_key), self.counter(*squares, by_key), self.counter(*count, labels)

    def _names(self, labels: Sequence[str] | None) -> tuple[str, ...]:
        """`labels` where given (`()`: none), else the shared ones."""
        return self.labels if labels is None else tuple(labels)


def at_zero(family: MetricWrapperBase, *labels: str, each: Iterable[str]) -> None:
    """Create the series of `family` labelled `labels` and then each value of `each`, at 0 until used.

    A series that exists reads 0 in an alert expression instead of "no data", so the values that never
    happened show beside those that did.
    """
    for value in each:
        family.labels(*labels, value)
