"""Periodic work (`Processor.tick`) under the runtime's one outage policy (workers/runtime/outage.py).

An exception from tick (Redis gone, a store or a collector unreachable) is an
outage, not a crash: the worker turns not ready, consumes nothing (its next
batch would meet the same outage), and tick is retried with the same
exponential backoff a batch gets until it succeeds. The consumer keeps its
group membership meanwhile (idle polls).
"""

from __future__ import annotations

import time

from workers.runtime.contract import Processor
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.outage import Outage
from workers.runtime.settings import WorkerSettings


class PeriodicWork:
    def __init__(self, processor: Processor, settings: WorkerSettings, metrics: RuntimeMetrics) -> None:
        self.processor = processor
        self.policy = Outage(processor.name, "periodic work", settings, metrics)
        self._retry_at = 0.0

    @property
    def outage(self) -> str | None:
        """Why tick is failing, while it is (the worker is not ready until it succeeds)."""
        return self.policy.reason

    def run(self, now: float) -> None:
        if time.monotonic() < self._retry_at:
            return
        try:
            self.processor.tick(now)
        except Exception as exc:  # an outage: counted, retried with backoff, never fatal
            self._retry_at = time.monotonic() + self.policy.failed(exc)
            return
        self.policy.recovered()
