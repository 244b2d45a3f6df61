"""How a worker declares its Prometheus families: each declaration states only what differs.

A metrics class builds its families through one `Families` bound to its registry, and optionally to the
label names most of its families share; a declaration then gives the name (written out in full,
docs/conventions.md "Metric names"), the help text, the label names where they are not the shared ones,
and a histogram's buckets. `at_zero` creates a family's series before their first use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase


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
