"""Synthetic traffic on every metric the code defines, for a real Prometheus to scrape.

Each metric gets one child per combination of the label values below (a
label not listed gets "x"); every tick increments the counters, observes the
histograms and sets the gauges, so rates, ratios, quantiles and the recording
rules all have something to compute.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from service.rules.config import GuardrailsConfig
from tests.dashboards.catalog import label_names

LABEL_VALUES: dict[str, tuple[str, ...]] = {
    "tenant": ("acme",),
    "variant": ("production",),
    "stage": tuple(sorted(GuardrailsConfig.model_validate({}).latency.slo_seconds)),
    "kind": ("regenerate", "thumbs", "copy", "edit", "citation_click", "any"),
    "direction": ("down", "up"),
    "reason": ("wrong",),
    "slice": ("all", "intent=billing"),  # shadow: the whole comparison and one slice
    "method": ("anytime", "bootstrap"),
    # "x" as for any other label, plus the outcomes the rules and panels select (session signals, answer checks)
    "outcome": ("x", "reformulated", "different", "not_compared", "resolved", "thumbs_down", "pass", "fail"),
}
OTHER = ("x",)
# Label values of one family of metrics only (by name prefix), where a shared label name (`stage`, `metric`)
# takes other values there: the online retrieval metrics' stages and the metrics the Quality panels select.
FAMILY_LABEL_VALUES: dict[str, dict[str, tuple[str, ...]]] = {
    "ragmon_exclusion_retrieval_": {
        "stage": ("candidates", "context"),
        "metric": ("recall", "ndcg", "mrr"),
        "k": ("5", "all"),
    },
}


def _children(metric: MetricWrapperBase) -> list[Any]:
    names = label_names(metric)
    if not names:
        return [metric]
    name = next(iter(metric.describe())).name
    values = dict(LABEL_VALUES)
    for prefix, family in FAMILY_LABEL_VALUES.items():
        if name.startswith(prefix):
            values.update(family)
    combos = itertools.product(*(values.get(n, OTHER) for n in names))
    return [metric.labels(*values) for values in combos]


class SyntheticTraffic:
    """Ticks and scrapes take turns, so every scrape sees all counters at the same tick: a share of
    two counters that grow together reads exactly 1."""

    def __init__(self, metrics: list[MetricWrapperBase]) -> None:
        self._series = [(m, child) for m in metrics for child in _children(m)]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="synthetic-traffic", daemon=True)

    def scraped(self, registry: CollectorRegistry) -> CollectorRegistry:
        """A registry to serve: it collects `registry` between ticks."""
        locked = CollectorRegistry()
        locked.register(_Between(self._lock, registry))
        return locked

    def tick(self) -> None:
        with self._lock:
            self._tick(time.time())

    def _tick(self, now: float) -> None:
        for metric, child in self._series:
            if isinstance(metric, Counter):
                child.inc()
            elif isinstance(metric, Histogram):
                child.observe(0.5)
            elif isinstance(metric, Gauge):
                name = next(iter(metric.describe())).name
                child.set(now if name.endswith("_timestamp_seconds") else 1)
            else:
                raise TypeError(f"{metric!r}: no synthetic traffic for this metric type; teach synthetic.py")

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self.tick()

    def __enter__(self) -> SyntheticTraffic:
        self.tick()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class _Between(Collector):
    def __init__(self, lock: threading.Lock, registry: CollectorRegistry) -> None:
        self._lock = lock
        self._registry = registry

    def collect(self) -> Any:
        with self._lock:
            return list(self._registry.collect())
