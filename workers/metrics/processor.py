"""The metrics worker: per-stage latency, cost, tokens, query counts, feedback joins, release markers."""

from __future__ import annotations

import json
from typing import Any

import redis

from workers.metrics.config import MetricsConfig
from workers.metrics.joins import FeedbackJoin, JoinInfo, ParkedFeedback
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.pricing import UNKNOWN, PriceTable, cap_stages
from workers.metrics.views import VIEWS, MetricsFeedback, MetricsRelease, MetricsTrace
from workers.runtime.labels import NONE, Children, ClosedSet, FirstSeenCap
from workers.runtime.types import Event, Readiness, Rejection

RELEASES_KEY = "ragmon:releases"


class MetricsProcessor:
    name = "metrics"
    event_types: tuple[str, ...] = ("trace", "feedback", "release")
    views = VIEWS

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
        self.child = Children()
        self._next_sweep = 0.0
        self._next_release_refresh = 0.0
        self._exported_releases: dict[tuple[str, str], str] = {}

    def readiness(self) -> Readiness:
        return Readiness(True)

    def process(self, events: list[Event]) -> list[Rejection]:
        """In-process counts first, then every join of the batch in one Redis round trip.

        The join scripts run in event order inside one pipeline, so a trace and
        its feedback in the same batch meet exactly as if sent one by one.
        """
        pipe = self.redis.pipeline(transaction=False)
        pending: list[tuple[str, str, Any]] = []
        for event in events:
            if event.type == "trace":
                pending.append(("trace", event.tenant, self._trace(pipe, event.tenant, event.body)))
            elif event.type == "feedback":
                f: MetricsFeedback = event.body
                payload: dict[str, Any] = {"kind": f.kind, "reason": f.reason}
                self.join.queue_feedback(pipe, event.tenant, f.trace_id, event.id, payload)
                pending.append(("feedback", event.tenant, payload))
        results = pipe.execute() if pending else []
        for (kind, tenant, context), result in zip(pending, results, strict=True):
            if kind == "trace":
                for parked in self.join.parked_from(result):
                    self._count_feedback(tenant, context, parked.payload)
            else:
                info = self.join.info_from(result)
                if info is None:
                    self.child(self.m.feedback_parked, tenant).inc()
                else:
                    self._count_feedback(tenant, info, context)
        for event in events:
            if event.type == "release":
                self._release(event, event.body)
        return []

    # -- traces ---------------------------------------------------------------

    def _trace(self, pipe: Any, tenant: str, t: MetricsTrace) -> JoinInfo:
        c, m = self.child, self.m
        variant = self.variant(tenant, t.variant)
        intent = self.intent(t.intent)
        tv = (tenant, variant)
        weight = 1.0 / t.sample_rate
        for stage, seconds in cap_stages(t.timings, self.stages):
            c(m.stage_seconds, *tv, stage).observe(seconds)
        c(m.queries, *tv, intent).inc()
        c(m.queries_estimated, *tv, intent).inc(weight)
        if t.answer.refused:
            c(m.refusals, *tv, intent).inc()
        elif not t.answer.citations:
            c(m.uncited, *tv, intent).inc()
        self._cost(tv, t, weight)
        info = JoinInfo(variant, self.release(tenant, t.release) if t.release else None, intent)
        self.join.queue_trace(pipe, tenant, t.trace_id, info)
        return info

    def _cost(self, tv: tuple[str, str], t: MetricsTrace, weight: float) -> None:
        c, m = self.child, self.m
        tokens: dict[str, int] = dict(t.usage.tokens.items())
        model = t.usage.model or NONE
        cost, source = self.prices.cost(t.usage.model, tokens, t.usage.cost_usd)
        c(m.cost_queries, *tv, source).inc()
        if cost is not None and source != UNKNOWN:
            c(m.cost_per_query, *tv, source).observe(cost)
            c(m.cost_estimated_usd, *tv, source).inc(cost * weight)
        model_label = model if self.prices.knows(model) or model == NONE else "other"
        for kind, n in tokens.items():
            if n:
                c(m.tokens, *tv, kind, model_label).inc(n)

    # -- feedback -------------------------------------------------------------

    def _count_feedback(self, tenant: str, info: JoinInfo, payload: dict[str, Any]) -> None:
        self.child(self.m.feedback, tenant, info.variant, info.release or NONE, info.intent or NONE,
                   payload["kind"], payload.get("reason") or NONE).inc()

    def _sweep_unjoined(self, now: float) -> None:
        claimed: list[tuple[str, ParkedFeedback]] = self.join.claim_expired(now)
        for tenant, parked in claimed:
            self.m.feedback_unjoined.labels(tenant, str(parked.payload.get("kind")),
                                            str(parked.payload.get("reason") or NONE)).inc()

    # -- releases -------------------------------------------------------------

    def _release(self, event: Event, r: MetricsRelease) -> None:
        """Kept in Redis (newest timestamp wins) so every replica exports the same current release."""
        ts = event.stored.timestamp.timestamp()
        field = f"{event.tenant}\x1f{r.variant}"
        current = self.redis.hget(RELEASES_KEY, field)
        if current is None or json.loads(current)["ts"] <= ts:
            self.redis.hset(RELEASES_KEY, field, json.dumps({"release": r.release, "ts": ts}))
        self._next_release_refresh = 0.0

    def _refresh_releases(self) -> None:
        for raw_field, raw in self.redis.hgetall(RELEASES_KEY).items():
            field = raw_field.decode() if isinstance(raw_field, bytes) else raw_field
            tenant, variant = field.split("\x1f", 1)
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

