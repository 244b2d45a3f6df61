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

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from prometheus_client import CollectorRegistry

from service.contracts.stored import stored_document
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


# --- every other worker: the same days, driven through each worker's processor --------------------------


@dataclass(frozen=True)
class Answer:
    """One answered request of a variant, as every worker reads it (its trace)."""

    tenant: str
    request_id: str
    variant: str
    release: str
    intent: str
    model: str = "emb-a"


@dataclass
class WorkersScenario:
    """The series scenario's traces for the exclusion, drift, shadow and faithfulness workers.

    A batch of a tenant: production and its live candidates (MetricsScenario.candidates) each answer every
    default intent, the candidates as shadows of production (the same request id); production's release
    changes weekly (the first batch of a week still answers some requests from the one before, so the run
    starts in the steady state of two live production releases, r-1 before r0), a candidate keeps its own;
    the candidate before cand-0 answers the first batch, so its variant and release leave within the first
    week as one does every 5 days later on. A hostile tenant sends 20 traces a batch, each with a fresh
    variant, release, intent and embedding model.
    """

    tenants: list[str]
    hostile: list[str] = field(default_factory=list)
    now: float = T0

    def clock(self) -> float:
        return self.now

    def answers(self, day: int, batch: int) -> list[Answer]:
        out = []
        week = day // 7
        for tenant in self.tenants:
            for j, intent in enumerate(DEFAULT_INTENTS):
                rid = f"{tenant}-{day}-{batch}-{j}"
                for variant in ["production", *MetricsScenario.candidates(day)]:
                    release = f"r{week}" if variant == "production" else f"{variant}-r1"
                    if variant == "production" and day % 7 == 0 and batch == 0 and j % 2:
                        release = f"r{week - 1}"  # the rollout: some requests still answered by the last one
                    out.append(Answer(tenant, rid, variant, release, intent))
                if (
                    day == 0 and batch == 0
                ):  # the candidate before cand-0 ends now: its values leave in week 1
                    out.append(Answer(tenant, rid, "cand-prev", "cand-prev-r1", intent))
        for tenant in self.hostile:
            for k in range(20):
                g = f"g{day}-{batch}-{k}"
                out.append(Answer(tenant, f"{tenant}-{g}", f"var-{g}", f"rel-{g}", f"int-{g}", f"model-{g}"))
        return out

    def run_day(self, drivers: list[Any], day: int) -> None:
        for batch in range(BATCHES_PER_DAY):
            self.now = T0 + day * DAY + batch * DAY / BATCHES_PER_DAY
            answers = self.answers(day, batch)
            for driver in drivers:
                driver.feed(answers, self.now)


def _event(views: dict[str, Any], kind: str, tenant: str, body: dict[str, Any], now: float, n: int) -> Event:
    when = datetime.fromtimestamp(now, UTC).isoformat()  # received then too: the drift windows read it
    record = stored_document(str(uuid.uuid4()), kind, tenant, when, when, body)
    return decoded_event(
        record,
        views,
        topic=f"series.{kind}s",
        offset=n,
        timestamp_ms=int(now * 1000),
    )


class ExclusionDriver:
    """Labelled exclusion samples (gold given with the sample on every other request; the rest proxy
    gold), one gold document excluded by a relevance predicate, the trace's release."""

    name = "exclusion"

    def __init__(self, client: redis.Redis, clock: Callable[[], float], **config: Any) -> None:
        from workers.exclusion.config import ExclusionConfig
        from workers.exclusion.metrics import ExclusionMetrics
        from workers.exclusion.processor import ExclusionProcessor
        from workers.exclusion.views import VIEWS as EXCLUSION_VIEWS

        self.registry = CollectorRegistry()
        cfg = ExclusionConfig(**config)
        self.views = EXCLUSION_VIEWS
        self.proc = ExclusionProcessor(client, ExclusionMetrics(self.registry, cfg, clock=clock), cfg)
        self._n: dict[str, int] = {}  # per tenant: a tenant's events do not depend on the others'

    def feed(self, answers: list[Answer], now: float) -> None:
        events = []
        for a in answers:
            n = self._n[a.tenant] = self._n.get(a.tenant, 0) + 1
            own = {"field": "tenant", "op": "eq", "value": a.tenant}

            def doc(i: str, locale: str, score: float, tenant: str = a.tenant) -> dict[str, Any]:
                return {"id": i, "score": score, "metadata": {"tenant": tenant, "locale": locale}}

            sample: dict[str, Any] = {
                "candidates": [doc("d0", "en-US", 0.9), doc("d1", "pt-BR", 0.85), doc("d2", "en-US", 0.3)]
            }
            if n % 2:
                sample["gold_ids"] = ["d0", "d1"]
            body = {
                "trace_id": f"x-{a.variant}-{a.request_id}",
                "request_id": a.request_id,
                "variant": a.variant,
                "release": a.release,
                "intent": a.intent,
                "query": {"text": "how do I pay?"},
                "retrieval": {
                    "documents": [{"id": "d0", "metadata": {"tenant": a.tenant, "locale": "en-US"}}],
                    "filters": {
                        "entitlement": [own],
                        "relevance": [{"field": "locale", "op": "eq", "value": "en-US"}],
                    },
                    "exclusion_sample": sample,
                },
            }
            events.append(_event(self.views, "trace", a.tenant, body, now, n))
        assert self.proc.process(events) == []


class DriftDriver:
    """The app's own query embeddings (model emb-a, configured), QUERIES per production answer, in
    sessions of two queries (the first session's second query repeats its first: a reformulation); the
    pinned encoder is off (it needs a downloaded model)."""

    name = "drift"
    QUERIES = 10

    def __init__(self, client: redis.Redis, **config: Any) -> None:
        import numpy as np

        from workers.drift.config import DriftConfig
        from workers.drift.processor import DriftProcessor
        from workers.drift.views import VIEWS as DRIFT_VIEWS

        self.registry = CollectorRegistry()
        cfg = DriftConfig.model_validate(
            {"encoder": {"enabled": False}, "app_embeddings": {"models": ["emb-a"]}, "seed": 7, **config}
        )
        self.views = DRIFT_VIEWS
        self.proc = DriftProcessor(cfg, client, self.registry)
        self._rngs: dict[str, Any] = {}
        self._np = np
        self._n: dict[str, int] = {}  # per tenant: a tenant's events do not depend on the others'

    def feed(self, answers: list[Answer], now: float) -> None:
        events = []
        for a in answers:
            vector: list[float] = []
            for q in range(self.QUERIES if a.variant == "production" else 1):
                n = self._n[a.tenant] = self._n.get(a.tenant, 0) + 1
                if q != 1:  # the second query of the first session repeats the first: a reformulation
                    rng = self._rngs.setdefault(a.tenant, self._np.random.default_rng(7))
                    vector = [float(x) for x in rng.normal(size=8)]
                body = {
                    "trace_id": f"q-{a.tenant}-{n}",
                    "request_id": f"{a.request_id}-{q}",
                    "variant": a.variant,
                    "intent": a.intent,
                    "session_id": f"{a.request_id}-{q // 2}",
                    "query": {
                        "text": "how do I reset my password?",
                        "embedding": vector,
                        "embedding_model": a.model,
                    },
                }
                events.append(_event(self.views, "trace", a.tenant, body, now, n))
        assert self.proc.process(events) == []
        self.proc.tick(now)


class ShadowDriver:
    """Production and each live candidate answer the same request (twins), so pairs form and the
    comparisons are recomputed and exported; candidates come and go."""

    name = "shadow"

    def __init__(self, client: redis.Redis, clock: Callable[[], float], **config: Any) -> None:
        from workers.shadow.config import ShadowConfig
        from workers.shadow.metrics import ShadowMetrics
        from workers.shadow.processor import ShadowProcessor
        from workers.shadow.store import ShadowStore
        from workers.shadow.views import VIEWS as SHADOW_VIEWS

        self.registry = CollectorRegistry()
        cfg = ShadowConfig(**{"resamples": 200, **config})
        self.views = SHADOW_VIEWS
        self.proc = ShadowProcessor(cfg, ShadowStore(client, cfg), ShadowMetrics(self.registry), clock=clock)
        self._n: dict[str, int] = {}  # per tenant: a tenant's events do not depend on the others'

    def feed(self, answers: list[Answer], now: float) -> None:
        events = []
        for a in answers:
            n = self._n[a.tenant] = self._n.get(a.tenant, 0) + 1
            total = 800.0 + (n % 7) * 50
            body = {
                "trace_id": f"s-{a.variant}-{a.request_id}",
                "request_id": a.request_id,
                "variant": a.variant,
                "intent": a.intent,
                "query": {"text": "how do I pay?"},
                "answer": {"text": "You pay monthly.", "refused": n % 11 == 0, "citations": []},
                "timings": {"retrieval": 100.0, "generation": total - 200, "total": total},
                "usage": {"model": "m", "tokens": {"prompt": 500, "completion": 80}, "cost_usd": 0.002},
            }
            events.append(_event(self.views, "trace", a.tenant, body, now, n))
        assert self.proc.process(events) == []
        self.proc.tick(now)


class _NoEmitter:
    def emit(self, topic: str, key: bytes | None, value: bytes, headers: Any = None) -> None:
        """The score events are not counted here: nothing to keep."""


class FaithfulnessDriver:
    """The faithfulness processor with a tiny HHEM-architecture checkpoint (random weights, a locally
    trained tokenizer: tests/workers/faithfulness/hhem_builder.py); scores mean nothing, series do. The
    budget runs it with sample_rate 1.0: every (variant, intent) score histogram the defaults can create
    exists from the first day, where the default rate fills the same series in over days, by chance."""

    name = "faithfulness"

    def __init__(self, model_dir: str, clock: Callable[[], float], **config: Any) -> None:
        from service.contracts import Topics
        from workers.faithfulness.config import FaithfulnessConfig
        from workers.faithfulness.metrics import FaithfulnessMetrics
        from workers.faithfulness.processor import FaithfulnessProcessor
        from workers.faithfulness.views import VIEWS as FAITHFULNESS_VIEWS

        self.registry = CollectorRegistry()
        cfg = FaithfulnessConfig.model_validate({"model": model_dir, **config})
        self.views = FAITHFULNESS_VIEWS
        self.proc = FaithfulnessProcessor(
            cfg, _NoEmitter(), FaithfulnessMetrics(self.registry), Topics("series"), clock=clock
        )
        self._n: dict[str, int] = {}  # per tenant: a tenant's events do not depend on the others'

    def feed(self, answers: list[Answer], now: float) -> None:
        events = []
        for a in answers:
            n = self._n[a.tenant] = self._n.get(a.tenant, 0) + 1
            body = {
                "trace_id": f"f-{a.variant}-{a.request_id}",
                "request_id": a.request_id,
                "variant": a.variant,
                "release": a.release,
                "intent": a.intent,
                "query": {"text": "what does the policy say?"},
                "retrieval": {
                    "documents": [{"id": "d0", "text": "The refund policy gives customers 30 days."}]
                },
                "answer": {"text": "" if n % 13 == 0 else "Customers have 30 days.", "refused": False},
            }
            events.append(_event(self.views, "trace", a.tenant, body, now, n))
        self.proc.process(events)
        self.proc.tick(now)


def tiny_hhem_checkpoint(root: Path) -> str:
    """Build the tiny HHEM look-alike the faithfulness tests use, under root; returns its directory."""
    from tests.workers.faithfulness.hhem_builder import random_hhem

    random_hhem(root / "flan-t5-tiny", root / "hhem", str(root / "flan-t5-tiny"), seed=1234)
    return str(root / "hhem")


def other_workers(client: redis.Redis, scenario: WorkersScenario, model_dir: str) -> list[Any]:
    """The exclusion, drift, shadow and faithfulness drivers at the defaults, on the scenario's clock."""
    return [
        ExclusionDriver(client, scenario.clock),
        DriftDriver(client),
        ShadowDriver(client, scenario.clock),
        FaithfulnessDriver(model_dir, scenario.clock, sample_rate=1.0),
    ]
