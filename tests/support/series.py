"""Active series per tenant over simulated months: the series-budget test and benchmark drive a worker's
processor in process, day by day, with releases, intents and candidates coming and going
(docs/series-budget.md).

A day of one tenant: production plus its live candidates answer every default intent, with errors,
truncated answers, several token kinds and every feedback kind; a weekly release marker for production;
a new candidate every 5 days that lives 10 (two live from day 0: the run starts in the steady state of
its traffic, so what grows after the first week is the registry, not the scenario). A hostile tenant sends a fresh variant, release, intent and
model on every trace instead.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry

from service.contracts.vocabulary import DEFAULT_INTENTS, FEEDBACK_KINDS
from tests.support.decoded import decoded_event
from tests.support.kafka import stored, trace_body
from workers.metrics.processor import MetricsProcessor
from workers.metrics.views import VIEWS
from workers.runtime.types import Event

DAY = 86400.0
T0 = datetime(2026, 1, 5, tzinfo=UTC).timestamp()  # a Monday
BATCHES_PER_DAY = 4  # the worker's tick runs between batches, as it does between polls
FEEDBACK_VALUES: dict[str, Any] = {"thumbs": -1, "dwell": 30, "edit": True}


def series_by_family(registry: CollectorRegistry, tenant: str) -> dict[str, int]:
    """Samples the registry exports with tenant=`tenant`, per family: what Prometheus stores as series
    (a histogram's every bucket, _sum and _count)."""
    out: dict[str, int] = defaultdict(int)
    for family in registry.collect():
        for sample in family.samples:
            if sample.labels.get("tenant") == tenant:
                out[family.name] += 1
    return dict(out)


def label_values(registry: CollectorRegistry, tenant: str) -> dict[str, set[str]]:
    """The distinct values of each label in the tenant's series (le excluded)."""
    out: dict[str, set[str]] = defaultdict(set)
    for family in registry.collect():
        for sample in family.samples:
            if sample.labels.get("tenant") == tenant:
                for k, v in sample.labels.items():
                    if k not in ("tenant", "le"):
                        out[k].add(v)
    return dict(out)


@dataclass
class MetricsScenario:
    """Drives a MetricsProcessor whose clock reads `self.now`."""

    tenants: list[str]
    hostile: list[str] = field(default_factory=list)
    now: float = T0
    _n: dict[str, int] = field(default_factory=dict)

    def clock(self) -> float:
        return self.now

    def _id(self, tenant: str) -> int:
        """Trace numbers per tenant: one tenant's events are the same whoever else runs beside it."""
        base = 10_000_000 * (1 + sorted(self.tenants + self.hostile).index(tenant))
        self._n[tenant] = self._n.get(tenant, 0) + 1
        return base + self._n[tenant]

    @staticmethod
    def candidates(day: int) -> list[str]:
        """A new candidate every 5 days, each live for 10."""
        return [f"cand-{k + 1}" for k in range(-1, day // 5 + 1) if 5 * k <= day < 5 * k + 10]

    def _tenant_events(self, tenant: str, day: int, batch: int) -> Iterator[dict[str, Any]]:
        when = datetime.fromtimestamp(self.now, UTC)
        week = day // 7
        if batch == 0 and day % 7 == 0:
            yield stored(
                "release", {"release": f"r{week}", "variant": "production"}, tenant=tenant, when=when
            )
        for variant in ["production", *self.candidates(day)]:
            release = f"r{week}" if variant == "production" else f"{variant}-r1"
            for j, intent in enumerate(DEFAULT_INTENTS):
                i = self._id(tenant)
                extra: dict[str, Any] = {}
                if j == 0 and batch == 1:
                    extra["error"] = {"stage": "generation", "type": "timeout"}
                if j == 1:
                    extra["answer"] = {"text": "a", "citations": [], "finish_reason": "length"}
                usage = {"model": "gpt-x", "tokens": {"prompt": 100, "completion": 20, "cached_prompt": 10}}
                body = trace_body(i, variant=variant, release=release, intent=intent, usage=usage, **extra)
                yield stored("trace", body, tenant=tenant, when=when)
                kind = FEEDBACK_KINDS[(self._n[tenant] + batch) % len(FEEDBACK_KINDS)]
                fb = {"trace_id": f"trace-{i}", "kind": kind, "value": FEEDBACK_VALUES.get(kind, True)}
                if kind == "thumbs":
                    fb["reason"] = "wrong"
                yield stored("feedback", fb, tenant=tenant, when=when)

    def _hostile_events(self, tenant: str) -> Iterator[dict[str, Any]]:
        when = datetime.fromtimestamp(self.now, UTC)
        for _ in range(20):
            i = self._id(tenant)
            g = f"g{i}"
            usage = {"model": f"model-{g}", "tokens": {"prompt": 1}}
            body = trace_body(i, variant=f"var-{g}", release=f"rel-{g}", intent=f"int-{g}", usage=usage)
            yield stored("trace", body, tenant=tenant, when=when)
            yield stored("feedback", {"trace_id": f"trace-{i}", "kind": "copy", "value": True}, tenant=tenant)
            yield stored("release", {"release": f"mark-{g}", "variant": f"mv-{g}"}, tenant=tenant, when=when)

    def run_day(self, proc: MetricsProcessor, day: int) -> None:
        for batch in range(BATCHES_PER_DAY):
            self.now = T0 + day * DAY + batch * DAY / BATCHES_PER_DAY
            raw = [e for t in self.tenants for e in self._tenant_events(t, day, batch)]
            raw += [e for t in self.hostile for e in self._hostile_events(t)]
            events: list[Event] = [decoded_event(r, VIEWS, topic="t") for r in raw]
            proc.process(events)
            proc.tick(self.now)
