"""The one outage policy of the runtime, applied to a batch (`process`) and to periodic work (`tick`) alike.

An outage (Redis, PostgreSQL, the broker, a collector or a model unreachable:
every exception that is not a poison, workers/runtime/poison.py) is counted
in `ragmon_worker_retries_total{worker, error}`, makes the worker not ready
with the reason, and the same work is tried again after an exponential
backoff from `worker_retry_initial_s` to `worker_retry_max_s`. Nothing is
committed or dead-lettered meanwhile (workers/runtime/consumer.py). The first
success clears the outage and resets the backoff.
"""

from __future__ import annotations

import logging

from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.settings import WorkerSettings

log = logging.getLogger("ragmon.worker")


class Outage:
    """The backoff state of one kind of work (`what`: "batch", "periodic work") of one worker."""

    def __init__(self, worker: str, what: str, settings: WorkerSettings, metrics: RuntimeMetrics) -> None:
        self.worker = worker
        self.what = what
        self.initial_s = settings.worker_retry_initial_s
        self.max_s = settings.worker_retry_max_s
        self.metrics = metrics
        self.reason: str | None = None  # set while the work fails: the worker is not ready meanwhile
        self.delay_s = self.initial_s

    def failed(self, exc: BaseException) -> float:
        """Count the outage, turn the worker not ready; returns how long to wait before trying again."""
        delay = self.delay_s
        self.metrics.retries.labels(self.worker, type(exc).__name__).inc()
        self.metrics.ready.labels(self.worker).set(0)
        self.reason = f"{self.what} failing through an outage: {type(exc).__name__}: {exc}"
        log.warning(
            "%s %s failed (%s: %s); not ready, retrying in %.1fs",
            self.worker,
            self.what,
            type(exc).__name__,
            exc,
            delay,
        )
        self.delay_s = min(delay * 2, self.max_s)
        return delay

    def recovered(self) -> None:
        if self.reason is not None:
            log.info("%s %s recovered", self.worker, self.what)
        self.reason = None
        self.delay_s = self.initial_s

    def abandoned(self) -> None:
        """The work was given up (a rebalance, a stop): no outage to report, the next try starts afresh."""
        self.reason = None
        self.delay_s = self.initial_s
