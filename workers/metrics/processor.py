"""The metrics worker: per-stage latency, cost, tokens, query counts, feedback joins, release markers."""

from __future__ import annotations

import json
from typing import Any

import redis

from service.contracts import FeedbackBody, ReleaseBody, TraceBody
from workers.metrics.config import MetricsConfig
from workers.metrics.joins import FeedbackJoin, JoinInfo, ParkedFeedback
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.pricing import UNKNOWN, PriceTable, cap_stages
from workers.runtime.labels import NONE, ClosedSet, FirstSeenCap
from workers.runtime.types import Event, Readiness, Rejection

RELEASES_KEY = "ragmon:releases"


class MetricsProcessor:
    name = "metrics"
    event_types = ("trace", "feedback", "release")

    def __init__(self, config: MetricsConfig, metrics: MetricsWorkerMetrics, client: redis.Redis) -> None:
        self.config = config
        self.m = metrics
        self.redis = client
        self.prices = PriceTable(config.prices)
        self.stages = frozenset(config.stages)
        self.intent = ClosedSet(config.intents)
        self.variant = FirstSeenCap(config.max_variants_per_tenant)
        self.release = FirstSeenCap(config.max_releases_per_tenant, always=())
        self.join = FeedbackJoin(client, config.join_ttl_s, config.park_s)
        self._next_sweep = 0.0
        self._next_release_refresh = 0.0
        self._exported_releases: dict[tuple[str, str], str] = {}

    def readiness(self) -> Readiness:
        return Readiness(True)

    def process(self, events: list[Event]) -> list[Rejection]:
        for event in events:
            if event.type == "trace":
                self._trace(event.tenant, event.body)
            elif event.type == "feedback":
                self._feedback(event.tenant, event.id, event.body)
            elif event.type == "release":
                self._release(event, event.body)
        return []

    # -- traces ---------------------------------------------------------------

    def _trace(self, tenant: str, t: TraceBody) -> None:
        variant = self.variant(tenant, t.variant)
        intent = self.intent(t.intent)
        tv = (tenant, variant)
        weight = 1.0 / t.sample_rate
        for stage, seconds in cap_stages(t.timings, self.stages):
            self.m.stage_seconds.labels(*tv, stage).observe(seconds)
        self.m.queries.labels(*tv, intent).inc()
        self.m.queries_estimated.labels(*tv, intent).inc(weight)
        if t.answer.refused:
            self.m.refusals.labels(*tv, intent).inc()
        elif not t.answer.citations:
            self.m.uncited.labels(*tv, intent).inc()
        self._cost(tv, t, weight)
        info = JoinInfo(variant, self.release(tenant, t.release) if t.release else None, intent)
        for parked in self.join.trace_arrived(tenant, t.trace_id, info):
            self._count_feedback(tenant, info, parked.payload)

    def _cost(self, tv: tuple[str, str], t: TraceBody, weight: float) -> None:
        tokens: dict[str, int] = dict(t.usage.tokens)
        model = t.usage.model or NONE
        cost, source = self.prices.cost(t.usage.model, tokens, t.usage.cost_usd)
        self.m.cost_queries.labels(*tv, source).inc()
        if cost is not None and source != UNKNOWN:
            self.m.cost_per_query.labels(*tv, source).observe(cost)
            self.m.cost_estimated_usd.labels(*tv, source).inc(cost * weight)
        model_label = model if self.prices.knows(model) or model == NONE else "other"
        for kind, n in tokens.items():
            if n:
                self.m.tokens.labels(*tv, kind, model_label).inc(n)

    # -- feedback -------------------------------------------------------------

    def _feedback(self, tenant: str, event_id: str, f: FeedbackBody) -> None:
        payload: dict[str, Any] = {"kind": f.kind, "reason": f.reason}
        info = self.join.feedback_arrived(tenant, f.trace_id, event_id, payload)
        if info is None:
            self.m.feedback_parked.labels(tenant).inc()
            return
        self._count_feedback(tenant, info, payload)

    def _count_feedback(self, tenant: str, info: JoinInfo, payload: dict[str, Any]) -> None:
        self.m.feedback.labels(tenant, info.variant, info.release or NONE, info.intent or NONE,
                               payload["kind"], payload.get("reason") or NONE).inc()

    def _sweep_unjoined(self, now: float) -> None:
        claimed: list[tuple[str, ParkedFeedback]] = self.join.claim_expired(now)
        for tenant, parked in claimed:
            self.m.feedback_unjoined.labels(tenant, str(parked.payload.get("kind")),
                                            str(parked.payload.get("reason") or NONE)).inc()

    # -- releases -------------------------------------------------------------

    def _release(self, event: Event, r: ReleaseBody) -> None:
        """Kept in Redis (newest timestamp wins) so every replica exports the same current release."""
        ts = event.stored.timestamp.timestamp()
        field = f"{event.tenant}\x1f{r.variant}"
        current = self.redis.hget(RELEASES_KEY, field)
        if current is None or json.loads(current)["ts"] <= ts:
            self.redis.hset(RELEASES_KEY, field, json.dumps({"release": r.release, "ts": ts}))
        self._next_release_refresh = 0.0

    def _refresh_releases(self) -> None:
        for raw_field, raw in self.redis.hgetall(RELEASES_KEY).items():
            tenant, variant = raw_field.decode().split("\x1f", 1)
            d = json.loads(raw)
            key = (tenant, variant)
            old = self._exported_releases.get(key)
            if old is not None and old != d["release"]:
                self.m.release_info.remove(tenant, variant, old)
            self.m.release_info.labels(tenant, variant, d["release"]).set(1)
            self.m.release_timestamp.labels(tenant, variant).set(d["ts"])
            self._exported_releases[key] = d["release"]

    def tick(self, now: float) -> None:
        if now >= self._next_sweep:
            self._next_sweep = now + 1.0
            self._sweep_unjoined(now)
        if now >= self._next_release_refresh:
            self._next_release_refresh = now + self.config.release_refresh_s
            self._refresh_releases()

    def close(self) -> None:
        return None

