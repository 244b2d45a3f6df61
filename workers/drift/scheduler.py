"""When to test, who tests, and what every replica exports.

A signal is tested once its reference is full and its current window holds
min_current_size queries, after K new current queries or T seconds with
anything new, whichever comes first. Replicas share the windows, so the test
is guarded by a Redis lease (SET NX PX) and the due-check is repeated under
the lease: a replica that wins the lease right after another one finished sees
the fresh last_test and pending count and does nothing.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from workers.drift.config import DriftConfig
from workers.drift.metrics import DriftMetrics
from workers.drift.mmd import Backend, mmd_test, permutation_statistic
from workers.drift.signals import ModelLabels, SignalKey
from workers.drift.windows import WindowStatus, WindowStore

log = logging.getLogger(__name__)


class DriftScheduler:
    def __init__(
        self,
        config: DriftConfig,
        store: WindowStore,
        metrics: DriftMetrics,
        labels: ModelLabels,
        rng: np.random.Generator,
    ) -> None:
        self.config = config
        self.store = store
        self.metrics = metrics
        self.labels = labels
        self.rng = rng
        self._next_refresh = 0.0
        self._statistic: Backend = permutation_statistic
        if config.backend == "alibi":
            from workers.drift.alibi_backend import alibi_statistic

            self._statistic = alibi_statistic

    def is_due(self, status: WindowStatus, now: float) -> bool:
        cfg = self.config
        reference_ready = status.reference >= (2 if status.frozen else cfg.reference_size)
        if not reference_ready or status.current < cfg.min_current_size:
            return False
        if status.forced or status.pending >= cfg.test_every_queries:
            return True
        return status.pending > 0 and now - status.last_test >= cfg.test_every_seconds

    def tick(self, now: float) -> None:
        live = self._live_signals(now)
        refresh = now >= self._next_refresh
        if refresh:
            self.store.trim_all(list(live), now - self.config.current_max_age_s)
        exported = self.exported(live)
        statuses = self.store.statuses(exported)
        for sig, status in zip(exported, statuses, strict=True):
            if self.is_due(status, now):
                self.run_if_leased(sig, now)
        if refresh:
            self._refresh(exported)
            self._next_refresh = now + self.config.publish_every_s

    def _live_signals(self, now: float) -> dict[SignalKey, float]:
        live = {}
        for sig, last_seen in self.store.signals():
            if now - last_seen <= self.config.retire_after_s:
                live[sig] = last_seen
            elif self.store.retire(sig):
                log.info(
                    "drift: retired %s (model %s, dim %d): not seen for %.0f s",
                    sig.stream,
                    sig.model,
                    sig.dim,
                    now - last_seen,
                )
        return live

    def exported(self, live: dict[SignalKey, float]) -> list[SignalKey]:
        """One signal per label set, so no two signals write the same gauges: the most recently
        seen one (a model's new dimension replaces its old one, which retires in time).
        Signals without a label (a model no longer configured) are neither tested nor exported."""
        best: dict[tuple[str, ...], tuple[float, str, SignalKey]] = {}
        for sig, last_seen in live.items():
            labels = self.labels.labels(sig)
            if labels is None:
                continue
            candidate = (last_seen, sig.encode(), sig)
            if labels not in best or candidate[:2] > best[labels][:2]:
                best[labels] = candidate
        return [sig for _, _, sig in best.values()]

    def run_if_leased(self, sig: SignalKey, now: float) -> bool:
        """Run the test unless another replica holds the lease or already ran it; True if run."""
        token = self.store.acquire_lease(sig, self.config.lease_s)
        if token is None:
            self.metrics.lease_busy.labels(sig.tenant, sig.signal).inc()
            return False
        try:
            status = self.store.statuses([sig])[0]
            if not self.is_due(status, now):
                return False
            return self._run(sig, status, now)
        finally:
            self.store.release_lease(sig, token)

    def _run(self, sig: SignalKey, status: WindowStatus, now: float) -> bool:
        cfg = self.config
        labels = self.labels.labels(sig)
        if labels is None:  # a model without a label is never exported, so never tested
            return False
        started = time.perf_counter()
        self.store.trim_current(sig, now - cfg.current_max_age_s)
        reference, current = self.store.read(sig)
        if len(reference) < 2 or len(current) < cfg.min_current_size:
            return False
        result = mmd_test(
            reference,
            current,
            alpha=cfg.alpha,
            permutations=cfg.permutations,
            rng=self.rng,
            statistic=self._statistic,
        )
        outcome = {
            "mmd2": result.mmd2,
            "p_value": result.p_value,
            "threshold": result.threshold,
            "drift": float(result.drift),
            "sigma": result.sigma,
            "permutations": float(result.permutations),
            "n_reference": float(result.n_reference),
            "n_current": float(result.n_current),
        }
        self.store.record_test(sig, outcome, now, consumed=status.pending)
        self.metrics.tests.labels(*labels).inc()
        self.metrics.test_duration.labels(sig.tenant, sig.signal).observe(time.perf_counter() - started)
        self.metrics.publish(labels, {**outcome, "tested_at": now}, len(reference), len(current))
        if result.drift:
            log.warning(
                "drift: %s model %s: MMD²=%.5f p=%.4f (threshold %.5f)",
                sig.stream,
                sig.model,
                result.mmd2,
                result.p_value,
                result.threshold,
            )
        return True

    def _refresh(self, live: list[SignalKey]) -> None:
        """Export what the replicas have stored, and withdraw signals that were retired."""
        statuses = self.store.statuses(live)
        results = self.store.results(live)
        exported: set[tuple[str, ...]] = set()
        for sig, status, result in zip(live, statuses, results, strict=True):
            labels = self.labels.labels(sig)
            if labels is None:
                continue
            exported.add(labels)
            self.metrics.publish(labels, result, status.reference, status.current)
        for gone in self.metrics.published() - exported:
            self.metrics.withdraw(gone)
