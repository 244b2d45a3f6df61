"""The assembler's consumer loop: poll spans -> store in Redis -> acknowledge -> commit; then assemble due traces.

The spans topic carries protobuf, not the JSON events the shared runtime decodes, so this
worker has its own short loop with the runtime's rules: offsets are committed only after
the spans are in Redis and every derived record is acknowledged; an outage (Redis, the
broker) rewinds the batch and retries it with backoff; a batch that would push the share of
dead letters over the limit halts consumption (not ready) without dead-lettering it; SIGTERM
finishes the batch, commits and exits. The runtime's metrics (lag, ready, retries, last commit) are reused.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata

from service.contracts.spans import SPANS_EVENT_TYPE
from workers.assembler.assembler import WORKER, Assembler
from workers.runtime.dlq import DlqLimit, DlqLimitExceeded
from workers.runtime.lag import measure_lag
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.settings import WorkerSettings

log = logging.getLogger("ragmon.worker.assembler")


class AssemblerLoop:
    def __init__(self, assembler: Assembler, settings: WorkerSettings, metrics: RuntimeMetrics) -> None:
        self.assembler = assembler
        self.settings = settings
        self.metrics = metrics
        self.stopping = threading.Event()
        self.halted: str | None = None
        self.dlq_limit = DlqLimit(
            settings.worker_dlq_max_ratio, settings.worker_dlq_window, settings.worker_dlq_min_messages
        )
        self._next_lag = 0.0
        self.consumer = KafkaConsumer(
            bootstrap_servers=settings.bootstrap_list,
            group_id=settings.group_id(WORKER),
            client_id=f"ragmon-{WORKER}-{settings.worker_instance}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=settings.worker_max_batch,
            session_timeout_ms=settings.worker_session_timeout_ms,
            heartbeat_interval_ms=settings.worker_heartbeat_interval_ms,
            max_poll_interval_ms=settings.worker_max_poll_interval_ms,
            request_timeout_ms=max(30_000, settings.worker_session_timeout_ms + 5000),
        )
        self.consumer.subscribe([settings.topics.spans])

    def run(self) -> int:
        log.info(
            "assembler consuming %s as group %s", self.settings.topics.spans, self.settings.group_id(WORKER)
        )
        self.metrics.ready.labels(WORKER).set(1)
        try:
            while not self.stopping.is_set():
                self.step()
        finally:
            self.metrics.ready.labels(WORKER).set(0)
            try:
                self.consumer.close(autocommit=False)
            except KafkaError as exc:
                log.warning("closing the consumer: %s", exc)
        return 0

    def step(self) -> None:
        if self.halted is not None:
            self._idle_poll()
        else:
            polled = self.consumer.poll(
                timeout_ms=self.settings.worker_poll_timeout_ms, max_records=self.settings.worker_max_batch
            )
            if polled:
                self._handle(polled)
        self._guarded(self.assembler.tick)  # traces already in Redis are still assembled while halted
        now = time.time()
        if now >= self._next_lag:
            self._next_lag = now + self.settings.worker_lag_interval_s
            self._measure_lag()

    def _idle_poll(self) -> None:
        """Keep the group membership without fetching (every partition paused)."""
        self.consumer.pause(*self.consumer.assignment())
        stray = self.consumer.poll(timeout_ms=self.settings.worker_poll_timeout_ms)
        self._rewind(stray)
        self.consumer.pause(*self.consumer.assignment())

    def _rewind(self, polled: dict[TopicPartition, list[Any]]) -> None:
        for tp, batch in polled.items():
            if batch and tp in self.consumer.assignment():
                self.consumer.seek(tp, batch[0].offset)

    def _handle(self, polled: dict[TopicPartition, list[Any]]) -> None:
        started = time.perf_counter()
        records = [r for batch in polled.values() for r in batch]
        good, bad = self.assembler.decode(records)
        try:
            self.dlq_limit.check(len(good), len(bad))
        except DlqLimitExceeded as exc:
            self.halted = "dead_letter_ratio"
            self._rewind(polled)
            self.metrics.halted.labels(WORKER, self.halted).set(1)
            self.metrics.ready.labels(WORKER).set(0)
            log.error("assembler HALTED: %s", exc)
            return
        if not self._guarded(lambda: self.assembler.store_decoded(good, bad)):
            self._rewind(polled)  # redelivered on the next poll; storing is idempotent
            return
        offsets = {tp: OffsetAndMetadata(batch[-1].offset + 1, "", -1) for tp, batch in polled.items()}
        try:
            self.consumer.commit(offsets=offsets)
        except CommitFailedError as exc:
            log.warning("commit refused after a rebalance (the records are redelivered, harmlessly): %s", exc)
        # The runtime's counters too: `ragmon up`'s status line and the dead-letter alerts read them.
        self.metrics.events.labels(WORKER, SPANS_EVENT_TYPE, "processed").inc(len(good))
        if bad:
            self.metrics.events.labels(WORKER, SPANS_EVENT_TYPE, "dead_letter").inc(len(bad))
            self.metrics.dead_letters.labels(WORKER, DeadLetterReason.UNDECODABLE).inc(len(bad))
        self.metrics.last_commit.labels(WORKER).set(time.time())
        self.metrics.batch_seconds.labels(WORKER).observe(time.perf_counter() - started)

    def readiness(self) -> tuple[bool, str]:
        if self.halted is not None:
            return False, f"halted: {self.halted}"
        return (False, "stopping") if self.stopping.is_set() else (True, "")

    def _guarded(self, work: Any) -> bool:
        """Run `work`; on an outage count it, back off (heartbeating through poll is not needed: short waits)."""
        try:
            work()
        except Exception as exc:  # an outage: Redis, the broker
            self.metrics.retries.labels(WORKER, type(exc).__name__).inc()
            self.metrics.ready.labels(WORKER).set(0)
            log.warning("assembler step failed (%s: %s); retrying", type(exc).__name__, exc)
            self.stopping.wait(min(self.settings.worker_retry_max_s, 1.0))
            return False
        self.metrics.ready.labels(WORKER).set(0 if self.halted else 1)
        return True

    def _measure_lag(self) -> None:
        measure_lag(self.consumer, self.metrics, WORKER)
