"""Periodic work (`Processor.tick`) with the outage handling a batch gets.

An exception from tick (Redis gone, a model store unreachable) is an outage,
not a crash: the worker turns not ready, consumes nothing (its next batch would
hit the same outage), and tick is retried with exponential backoff until it
succeeds. The consumer keeps its group membership meanwhile (idle polls).
"""

from __future__ import annotations

import logging
import time

from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.settings import WorkerSettings
from workers.runtime.types import Processor

log = logging.getLogger("ragmon.worker")


class PeriodicWork:
    def __init__(self, processor: Processor, settings: WorkerSettings, metrics: RuntimeMetrics) -> None:
        self.processor = processor
        self.name = processor.name
        self.settings = settings
        self.metrics = metrics
        self.outage: str | None = None  # set while tick fails: the worker is not ready until it succeeds
        self._retry_at = 0.0
        self._delay = settings.worker_retry_initial_s

    def run(self, now: float) -> None:
        if time.monotonic() < self._retry_at:
            return
        try:
            self.processor.tick(now)
        except Exception as exc:  # an outage: counted, retried with backoff, never fatal
            self.metrics.retries.labels(self.name, type(exc).__name__).inc()
            self.metrics.ready.labels(self.name).set(0)
            if self.outage is None or self._delay >= self.settings.worker_retry_max_s:
                log.warning(
                    "%s periodic work failed (%s: %s); not ready, retrying in %.1fs",
                    self.name,
                    type(exc).__name__,
                    exc,
                    self._delay,
                )
            self.outage = f"periodic work failing: {type(exc).__name__}: {exc}"
            self._retry_at = time.monotonic() + self._delay
            self._delay = min(self._delay * 2, self.settings.worker_retry_max_s)
            return
        if self.outage is not None:
            log.info("%s periodic work recovered", self.name)
        self.outage = None
        self._delay = self.settings.worker_retry_initial_s
