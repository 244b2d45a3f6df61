"""The shadow worker's processor: record each trace and score event, recompute comparisons.

process(): one atomic Redis script per event (store.py) records its outcomes
and forms pairs; a redelivered event is a no-op there. tick(): a comparison
whose window got recompute_every_pairs new pairs, or recompute_every_s
passed, is recomputed by the one replica holding its lease; the result is
stored in Redis and every replica exports the stored results. Every
candidate_sweep_s, candidates with no event for candidate_window_s leave
(their state in Redis, then their series in every replica's registry).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
import redis

from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
from workers.runtime.contract import Processor
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import Event, Rejection
from workers.shadow.config import ShadowConfig
from workers.shadow.live import coverage, live_comparison
from workers.shadow.metrics import ShadowMetrics
from workers.shadow.outcomes import exclusion_outcome, faithfulness_outcome, trace_outcome
from workers.shadow.results import comparison_from_dict
from workers.shadow.store import Counts, Item, ShadowStore
from workers.shadow.views import VIEWS, ShadowTrace

log = logging.getLogger(__name__)


def _score_item(
    body: FaithfulnessScoreEvent | ExclusionResultEvent, prefix: str, outcome: dict[str, Any]
) -> Item:
    """A score event's field of its request's hash: `prefix` + variant, beside the trace's."""
    return Item(body.tenant, body.request_id, prefix + body.variant, _json(outcome), body.variant, False)


def _json(outcome: dict[str, Any]) -> str:
    return orjson.dumps(outcome).decode()


class ShadowProcessor(Processor):
    name = "shadow"
    event_types: tuple[str, ...] = ("trace", "score")
    views = VIEWS  # traces are decoded once into ShadowTrace (workers/shadow/views.py)

    def __init__(
        self,
        config: ShadowConfig,
        store: ShadowStore,
        metrics: ShadowMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.clock = clock
        self.store = store
        self.metrics = metrics
        self._next_publish = 0.0
        self._next_sweep = 0.0

    def process(self, events: list[Event]) -> list[Rejection]:
        rejections: list[Rejection] = []
        items: list[Item] = []
        kinds: list[str] = []
        for event in events:
            planned = self._item(event)
            if planned is None:
                rejections.append(
                    Rejection(
                        event,
                        DeadLetterReason.UNEXPECTED_TYPE,
                        f"type: the shadow worker reads traces and score events, got {event.type!r}",
                    )
                )
            else:
                items.append(planned[0])
                kinds.append(planned[1])
        applied: Counter[tuple[str, str]] = Counter()
        formed: Counter[str] = Counter()
        refused: Counter[str] = Counter()
        for item, kind, done in zip(items, kinds, self.store.record_many(items, self.clock()), strict=True):
            if done.refused:
                refused[item.tenant] += 1
            elif done.new:
                applied[(item.tenant, kind)] += 1
                if done.formed:
                    formed[item.tenant] += done.formed
        for (tenant, kind), n in applied.items():
            self.metrics.events.labels(tenant, kind).inc(n)
        for tenant, n in formed.items():
            self.metrics.pairs_formed.labels(tenant).inc(n)
        for tenant, n in refused.items():
            self.metrics.refused.labels(tenant).inc(n)
        return rejections

    def _item(self, event: Event) -> tuple[Item, str] | None:
        body = event.body
        if isinstance(body, ShadowTrace):
            total_ms = body.timings.get("total")
            return Item(
                event.tenant,
                body.request_id,
                "trace:" + body.variant,
                _json(trace_outcome(body, self.config)),
                body.variant,
                True,
                None if total_ms is None else total_ms / 1000.0,
            ), "trace"
        if isinstance(body, FaithfulnessScoreEvent):
            return _score_item(body, "faith:", faithfulness_outcome(body)), "faithfulness"
        if isinstance(body, ExclusionResultEvent):
            return _score_item(body, "excl:", exclusion_outcome(body)), "exclusion"
        return None

    def tick(self, now: float) -> None:
        """Recompute due comparisons. A Redis outage is counted in tick_errors and raised: the runtime's
        outage policy retries it with backoff, the worker not ready meanwhile (workers/runtime/outage.py)."""
        try:
            self._tick(now)
        except redis.exceptions.RedisError as exc:
            self.metrics.tick_errors.labels(type(exc).__name__).inc()
            raise

    def _tick(self, now: float) -> None:
        if now >= self._next_sweep:
            self._next_sweep = now + self.config.candidate_sweep_s
            for tenant, _ in self.store.expire_candidates(now):
                self.metrics.candidates_expired.labels(tenant).inc()
        candidates = self.store.candidates()
        for tenant, candidate in candidates:
            if self._is_due(tenant, candidate, now):
                self.recompute_if_leased(tenant, candidate, now)
        if now >= self._next_publish:
            self._next_publish = now + min(self.config.recompute_every_s, 10.0)
            self._publish(candidates)

    def _is_due(self, tenant: str, candidate: str, now: float) -> bool:
        pending = self.store.counts(tenant).pending.get(candidate, 0)
        if pending >= self.config.recompute_every_pairs:
            return True
        return (
            pending > 0
            and now - self.store.last_recompute(tenant, candidate) >= self.config.recompute_every_s
        )

    def recompute_if_leased(self, tenant: str, candidate: str, now: float) -> bool:
        token = self.store.acquire_lease(tenant, candidate)
        if token is None:
            return False
        try:
            pending = self.store.counts(tenant).pending.get(candidate, 0)
            if not self._is_due(tenant, candidate, now):
                return False  # another replica just did it
            started = time.perf_counter()
            comparison, _ = live_comparison(self.store, self.config, tenant, candidate)
            self.store.redis.set(
                self._result_key(tenant, candidate), json.dumps(comparison.to_dict()), ex=self.config.keep_s
            )
            self.store.mark_recomputed(tenant, candidate, now, pending)
            self.metrics.recompute_seconds.labels(tenant).observe(time.perf_counter() - started)
            self.metrics.recomputes.labels(tenant, candidate).inc()
            self.metrics.publish(tenant, candidate, comparison)
            self.metrics.publish_coverage(
                tenant, candidate, coverage(self.store, self.config, tenant, candidate)
            )
            for flag in comparison.masked_regressions:
                log.warning(
                    "shadow %s/%s: %s worse in %s=%s (%d pairs, %s) while better overall",
                    tenant,
                    candidate,
                    flag.metric,
                    flag.dimension,
                    flag.value,
                    flag.n,
                    flag.strength,
                )
            return True
        finally:
            self.store.release_lease(tenant, candidate, token)

    def _result_key(self, tenant: str, candidate: str) -> str:
        return f"{self.store.prefix(tenant)}result:{candidate}"

    def _publish(self, candidates: list[tuple[str, str]]) -> None:
        """Export what any replica stored, so every replica shows the same comparison, and the coverage
        from the live counts (also for a candidate whose traces never paired)."""
        self.metrics.forget_others(set(candidates))  # left their window, here or on another replica
        counts: dict[str, Counts] = {}
        for tenant, candidate in candidates:
            if tenant not in counts:
                counts[tenant] = self.store.counts(tenant)
            self.metrics.publish_coverage(
                tenant, candidate, coverage(self.store, self.config, tenant, candidate, counts[tenant])
            )
        for tenant, candidate in candidates:
            raw = self.store.redis.get(self._result_key(tenant, candidate))
            if raw is not None:
                self.metrics.publish(tenant, candidate, comparison_from_dict(json.loads(raw)))
