"""The review sampler's processor: plan a batch in Redis, apply it to PostgreSQL, count what happened."""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg
import redis

from service.contracts.driftflags import flagged_windows
from workers.checks.config import ChecksConfig
from workers.review.config import STRATA, ReviewConfig
from workers.review.metrics import ReviewMetrics
from workers.review.plan import Planner
from workers.review.store import QueueStore
from workers.review.views import VIEWS
from workers.runtime.contract import Processor
from workers.runtime.reviewstore import MigratedFirst
from workers.runtime.types import Event, Readiness, Rejection

log = logging.getLogger("ragmon.worker.review")

_DEPTH = (
    "SELECT tenant, stratum, count(*), extract(epoch FROM now() - min(queued_at)) FROM review_item "
    "WHERE reviews_done < reviews_wanted GROUP BY tenant, stratum"
)
_LABELS = (
    "SELECT tenant, count(*) FROM review_label WHERE labelled_at > now() - interval '1 day' GROUP BY tenant"
)
_CALIBRATION = (
    "SELECT DISTINCT ON (tenant, kind) tenant, kind, result FROM calibration_result "
    "ORDER BY tenant, kind, computed_at DESC"
)


class ReviewProcessor(Processor):
    name = "review"
    event_types: tuple[str, ...] = ("trace", "feedback", "score")
    views = VIEWS  # traces and feedback decoded once, into what the sampler reads (views.py)

    def __init__(
        self,
        config: ReviewConfig,
        metrics: ReviewMetrics,
        client: redis.Redis,
        store: QueueStore,
        checks: ChecksConfig | None = None,
    ) -> None:
        self.config = config
        self.m = metrics
        self.planner = Planner(config, client, checks)
        self.redis = client
        self._drift_read_at: dict[str, float] = {}
        self._drift_flags: dict[str, frozenset[str]] = {}
        self.store = store
        self._next_refresh = 0.0
        self._tenants: set[str] = set()
        self.store_ready = MigratedFirst("review store", store.migrate, log)

    def readiness(self) -> Readiness:
        """Not ready until the store is reachable and migrated: a down PostgreSQL is not a crash loop."""
        return self.store_ready.readiness()

    def process(self, events: list[Event]) -> list[Rejection]:
        with self.store.batch() as cur:
            fresh = self.store.claim(cur, events)
            plan = self.planner.plan(fresh, self._drifting(fresh))
            outcome = self.store.apply(cur, plan)
            self.store.advance(cur, events)
        for (tenant, stratum), n in outcome.queued.items():
            self.m.queued.labels(tenant, stratum).inc(n)
        for (tenant, stratum), n in outcome.overflow.items():
            self.m.overflow.labels(tenant, stratum).inc(n)
        for (tenant, stratum), n in plan.parked.items():
            self.m.parked.labels(tenant, stratum).inc(n)
        for tenant, n in outcome.scored.items():
            self.m.scored.labels(tenant).inc(n)
        return []

    def _drifting(self, events: list[Event]) -> dict[str, frozenset[str]]:
        """The flagged query-drift windows of the batch's tenants, re-read every `drift_refresh_s`."""
        now = time.time()
        batch = {e.tenant for e in events if e.type == "trace"}
        tenants = sorted(
            t for t in batch if now - self._drift_read_at.get(t, -1e18) >= self.config.drift_refresh_s
        )
        if tenants:
            found = flagged_windows(
                self.redis, self.config.drift_key_prefix, tenants, now, self.config.drift_flag_max_age_s
            )
            for tenant in tenants:
                self._drift_read_at[tenant] = now
                self._drift_flags[tenant] = found.get(tenant, frozenset())
        return {t: self._drift_flags[t] for t in batch if self._drift_flags.get(t)}

    def tick(self, now: float) -> None:
        if now < self._next_refresh:
            return
        try:
            self.refresh_gauges()
        except (
            psycopg.Error
        ):  # an outage: the runtime retries tick with backoff, the worker not ready meanwhile
            self.m.store_up.set(0)
            raise
        self.m.store_up.set(1)
        self._next_refresh = now + self.config.refresh_s

    def refresh_gauges(self) -> None:
        conn = self.store.connection()
        with conn.transaction(), conn.cursor() as cur:
            depth = {(t, s): (n, age) for t, s, n, age in cur.execute(_DEPTH).fetchall()}
            labels: dict[str, int] = dict(cur.execute(_LABELS).fetchall())
            calibration = cur.execute(_CALIBRATION).fetchall()
        self._tenants |= {t for t, _ in depth} | set(labels)
        for tenant in self._tenants:
            for stratum in STRATA:
                n, age = depth.get((tenant, stratum), (0, 0.0))
                self.m.queue_depth.labels(tenant, stratum).set(n)
                self.m.oldest_waiting.labels(tenant, stratum).set(float(age))
            self.m.reviewed_last_day.labels(tenant).set(labels.get(tenant, 0))
        for tenant, kind, result in calibration:
            self._export_calibration(tenant, kind, result)

    def _export_calibration(self, tenant: str, kind: str, result: dict[str, Any]) -> None:
        if kind == "reviewers":
            kappa = (result.get("kappa") or {}).get("kappa")
            if kappa is not None:
                self.m.reviewer_kappa.labels(tenant).set(kappa)
            return
        if kind == "faithful_rate":
            for estimate, value in (
                ("prediction_powered", result.get("ppi_rate")),
                ("judge", result.get("raw_rate")),
                ("population", (result.get("reweighted") or {}).get("rate")),
            ):
                if value is not None:
                    self.m.faithful_rate.labels(tenant, estimate).set(value)
            return
        configured = result.get("configured") or {}
        population = configured.get("population") or {}
        figures = {
            "reviewed": (
                (configured.get("kappa") or {}).get("kappa"),
                (configured.get("balanced_accuracy") or {}).get("value"),
            ),
            "population": (
                (population.get("kappa") or {}).get("value"),
                (population.get("balanced_accuracy") or {}).get("value"),
            ),
        }
        for weighting, (kappa, accuracy) in figures.items():
            if kappa is not None:
                self.m.judge_kappa.labels(tenant, kind, weighting).set(kappa)
            if accuracy is not None:
                self.m.judge_balanced_accuracy.labels(tenant, kind, weighting).set(accuracy)

    def close(self) -> None:
        self.store.close()
