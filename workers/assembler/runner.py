"""The assembler's consumer loop: poll spans -> store in Redis -> acknowledge -> commit; then assemble due traces.

The spans topic carries protobuf, not the JSON events the shared runtime decodes, so this
worker has its own short loop with the runtime's rules: offsets are committed only after
the spans are in Redis and every derived record is acknowledged; an outage (Redis, the
broker) rewinds the batch and retries it with backoff; SIGTERM finishes the batch, commits
and exits. The runtime's metrics (lag, ready, retries, last commit) are reused.
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
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.settings import WorkerSettings

log = logging.getLogger("ragmon.worker.assembler")


class AssemblerLoop:
    def __init__(self, assembler: Assembler, settings: WorkerSettings, metrics: RuntimeMetrics) -> None:
        self.assembler = assembler
        self.settings = settings
        self.metrics = metrics
        self.stopping = threading.Event()
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
        log.info("assembler consuming %s as group %s", self.settings.topics.spans, self.settings.group_id(WORKER))
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
        polled = self.consumer.poll(timeout_ms=self.settings.worker_poll_timeout_ms,
                                    max_records=self.settings.worker_max_batch)
        if polled:
            self._handle(polled)
        self._guarded(self.assembler.tick)
        now = time.time()
        if now >= self._next_lag:
            self._next_lag = now + self.settings.worker_lag_interval_s
            self._measure_lag()

    def _handle(self, polled: dict[TopicPartition, list[Any]]) -> None:
        started = time.perf_counter()
        records = [r for batch in polled.values() for r in batch]
        dead: list[int] = []
        if not self._guarded(lambda: dead.append(self.assembler.consume(records))):
            for tp, batch in polled.items():  # redelivered on the next poll; storing is idempotent
                self.consumer.seek(tp, batch[0].offset)
            return
        offsets = {tp: OffsetAndMetadata(batch[-1].offset + 1, "", -1) for tp, batch in polled.items()}
        try:
            self.consumer.commit(offsets=offsets)
        except CommitFailedError as exc:
            log.warning("commit refused after a rebalance (the records are redelivered, harmlessly): %s", exc)
        # The runtime's counters too: `ragmon up`'s status line and the dead-letter alerts read them.
        self.metrics.events.labels(WORKER, SPANS_EVENT_TYPE, "processed").inc(len(records) - dead[0])
        if dead[0]:
            self.metrics.events.labels(WORKER, SPANS_EVENT_TYPE, "dead_letter").inc(dead[0])
            self.metrics.dead_letters.labels(WORKER, "undecodable").inc(dead[0])
        self.metrics.last_commit.labels(WORKER).set(time.time())
        self.metrics.batch_seconds.labels(WORKER).observe(time.perf_counter() - started)

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
        self.metrics.ready.labels(WORKER).set(1)
        return True

    def _measure_lag(self) -> None:
        assignment = list(self.consumer.assignment())
        if not assignment:
            return
        try:
            ends = self.consumer.end_offsets(assignment)
        except KafkaError as exc:
            log.debug("lag not measured: %s", exc)
            return
        for tp in assignment:
            try:
                position = self.consumer.position(tp)
            except KafkaError:
                continue
            end = max(ends.get(tp) or 0, self.consumer.highwater(tp) or 0, position)
            self.metrics.lag.labels(WORKER, tp.topic, str(tp.partition)).set(end - position)
