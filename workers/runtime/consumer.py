"""The consumer loop: decode -> dedupe -> process -> emit -> mark done -> commit.

It keeps the guarantees of the worker contract (workers/runtime/contract.py).
Committing is the last step, so an offset is never committed for work that
did not happen. Bad input goes to the dead-letter topic and processing goes
on; an outage is retried with backoff on the same batch (partitions paused,
group membership kept) and never dead-lettered. Periodic work (`tick`, see
periodic.py) gets the same policy (outage.py), and a readiness check that raises is not ready.
Memory is bounded by the poll size: nothing is fetched while a batch is in flight.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import redis
from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata

from workers.runtime.contract import Processor
from workers.runtime.decode import RecordDecoder, Undecodable
from workers.runtime.dedupe import Dedupe
from workers.runtime.dlq import DlqLimit, DlqLimitExceeded, dlq_headers, emit_dead_letter
from workers.runtime.labels import Children
from workers.runtime.lag import measure_lag
from workers.runtime.metrics import RuntimeMetrics
from workers.runtime.outage import Outage
from workers.runtime.periodic import PeriodicWork
from workers.runtime.poison import is_poison, poison_detail, poison_reason
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.records import SubscriptionDecoder
from workers.runtime.settings import WorkerSettings
from workers.runtime.types import Emitter, Event, Readiness, Rejection, SourceRecord

log = logging.getLogger("ragmon.worker")


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, runtime: ConsumerRuntime) -> None:
        self.runtime = runtime

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.runtime.on_revoked(revoked)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.runtime.metrics.assigned.labels(self.runtime.name).set(len(self.runtime.consumer.assignment()))
        log.info("%s assigned %s", self.runtime.name, sorted((tp.topic, tp.partition) for tp in assigned))


class _Progress:
    """How far one batch got: set once the processor finished it (events, duplicates, rejections)."""

    __slots__ = ("processed",)

    def __init__(self) -> None:
        self.processed: tuple[list[Event], list[Event], list[Rejection]] | None = None


class ConsumerRuntime:
    def __init__(
        self,
        processor: Processor,
        settings: WorkerSettings,
        metrics: RuntimeMetrics,
        emitter: Emitter,
        redis_client: redis.Redis,
    ) -> None:
        self.processor = processor
        self.name = processor.name
        self.settings = settings
        self.metrics = metrics
        # Every (worker, reason) is exported from 0: a counter first exported at 1 is no increase to
        # Prometheus' increase(), so the first dead letter of a reason would never fire RagmonDeadLetters
        # (VictoriaMetrics counts it: docs/deploy.md "VictoriaMetrics and vmalert"). A closed set.
        for reason in DeadLetterReason:
            metrics.dead_letters.labels(self.name, reason.value)
        self.emitter = emitter
        self.dedupe = Dedupe(redis_client, self.name, settings.worker_dedupe_ttl_s)
        self.dlq_limit = DlqLimit(
            settings.worker_dlq_max_ratio, settings.worker_dlq_window, settings.worker_dlq_min_messages
        )
        topics = settings.topics
        self.type_by_topic = {topics.for_event(t): t for t in processor.event_types}
        # Topics of non-native records (scores, raw spans) come with their own decoder: workers/runtime/records.py
        self.decoders: dict[str, SubscriptionDecoder] = {}
        for sub in processor.subscriptions:
            self.type_by_topic[sub.topic] = sub.event_type
            self.decoders[sub.topic] = sub.decode
        self.decoder = RecordDecoder(processor.views)
        self.dlq_topic = topics.dlq
        self.stopping = threading.Event()
        self.halted: str | None = None
        self._revoked = False
        self._stop_requested_at: float | None = None
        self._next_lag = 0.0
        self.periodic = PeriodicWork(processor, settings, metrics)
        self.batch_outage = Outage(self.name, "batch", settings, metrics)  # the policy periodic work has too
        self._child = Children()
        self.consumer = self._make_consumer()

    def _make_consumer(self) -> KafkaConsumer:
        s = self.settings
        consumer = KafkaConsumer(
            bootstrap_servers=s.bootstrap_list,
            group_id=s.group_id(self.name),
            client_id=f"ragmon-{self.name}-{s.worker_instance}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=s.worker_max_batch,
            session_timeout_ms=s.worker_session_timeout_ms,
            heartbeat_interval_ms=s.worker_heartbeat_interval_ms,
            max_poll_interval_ms=s.worker_max_poll_interval_ms,
            request_timeout_ms=max(30_000, s.worker_session_timeout_ms + 5000),
        )
        consumer.subscribe(sorted(self.type_by_topic), listener=_Rebalance(self))
        return consumer

    # -- lifecycle ---------------------------------------------------------

    def request_stop(self) -> None:
        if not self.stopping.is_set():
            self._stop_requested_at = time.monotonic()
            self.stopping.set()

    def on_revoked(self, revoked: list[TopicPartition]) -> None:
        self._revoked = True
        for tp in revoked:
            with contextlib.suppress(KeyError):
                self.metrics.lag.remove(self.name, tp.topic, str(tp.partition))

    def run(self) -> int:
        log.info(
            "%s consuming %s as group %s",
            self.name,
            sorted(self.type_by_topic),
            self.settings.group_id(self.name),
        )
        try:
            while not self.stopping.is_set():
                self._step()
        finally:
            self._shutdown()
        return 0

    def _shutdown(self) -> None:
        self.metrics.ready.labels(self.name).set(0)
        try:
            self.consumer.close(autocommit=False)  # leaves the group: partitions move at once
        except KafkaError as exc:
            log.warning("closing the consumer: %s", exc)
        self.processor.close()
        log.info("%s stopped", self.name)

    def _step(self) -> None:
        now = time.time()
        if self.halted is not None:  # consumes nothing; the state already accepted is still worked on
            self._idle_poll(500)
            self.periodic.run(now)
            return
        if not self.readiness().ready:
            self.metrics.ready.labels(self.name).set(0)
            self._idle_poll(500)
            self.periodic.run(now)
            return
        self.metrics.ready.labels(self.name).set(1)
        self.consumer.resume(*self.consumer.assignment())
        polled = self.consumer.poll(
            timeout_ms=self.settings.worker_poll_timeout_ms, max_records=self.settings.worker_max_batch
        )
        if polled:
            self.handle(polled)
        self.periodic.run(time.time())
        if now >= self._next_lag:
            self._next_lag = now + self.settings.worker_lag_interval_s
            self._measure_lag()

    @property
    def retrying(self) -> str | None:
        """Why the in-flight batch is being retried, while it is."""
        return self.batch_outage.reason

    def readiness(self) -> Readiness:
        """Not ready while halted or through an outage; else the processor's (a check that raises: not ready)."""
        if self.halted is not None:
            return Readiness(False, f"halted: {self.halted}")
        for outage in (self.retrying, self.periodic.outage):
            if outage is not None:
                return Readiness(False, outage)
        try:
            return self.processor.readiness()
        except Exception as exc:  # an outage inside the check itself (e.g. Redis)
            self.metrics.retries.labels(self.name, type(exc).__name__).inc()
            return Readiness(False, f"readiness check failed: {type(exc).__name__}: {exc}")

    def _idle_poll(self, timeout_ms: int) -> None:
        """Poll with every partition paused: keeps group membership, fetches nothing."""
        self.consumer.pause(*self.consumer.assignment())
        stray = self.consumer.poll(timeout_ms=timeout_ms)
        if stray:  # partitions assigned during this poll were not paused yet
            self._rewind(stray)
            self.consumer.pause(*self.consumer.assignment())

    def _rewind(self, polled: dict[TopicPartition, list[Any]]) -> None:
        for tp, records in polled.items():
            if records and tp in self.consumer.assignment():
                self.consumer.seek(tp, records[0].offset)

    # -- one batch ---------------------------------------------------------

    def handle(self, polled: dict[TopicPartition, list[Any]]) -> bool:
        """Process and commit one polled batch; False when it was abandoned (halt, rebalance, stop)."""
        started = time.perf_counter()
        events: list[Event] = []
        dead: list[Undecodable] = []
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, records in polled.items():
            expected = self.type_by_topic.get(tp.topic)
            decoder = self.decoders.get(tp.topic)
            for rec in records:
                decoded = self._decode(rec, expected, decoder)
                (dead if isinstance(decoded, Undecodable) else events).append(decoded)  # type: ignore[arg-type]
            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
        try:
            self.dlq_limit.check(len(events), len(dead))
        except DlqLimitExceeded as exc:
            self._halt("dead_letter_ratio", str(exc), polled)
            return False
        progress = _Progress()
        done = self._with_retries(lambda: self._apply(events, dead, offsets, progress), polled)
        if done:
            self.metrics.batch_seconds.labels(self.name).observe(time.perf_counter() - started)
        return done

    def _decode(
        self, rec: Any, expected: str | None, decoder: SubscriptionDecoder | None
    ) -> Event | Undecodable:
        """Decoding is pure: whatever it raises is about this record alone, so the record is a dead letter."""
        try:
            return decoder(rec) if decoder else self.decoder.decode(rec, expected)
        except Exception as exc:
            log.warning(
                "%s could not decode %s[%d]@%d",
                self.name,
                rec.topic,
                rec.partition,
                rec.offset,
                exc_info=True,
            )
            source = SourceRecord(rec.topic, rec.partition, rec.offset, rec.key, rec.timestamp)
            return Undecodable(
                source, rec.value, list(rec.headers or []), DeadLetterReason.UNDECODABLE, poison_detail(exc)
            )

    def _apply(
        self,
        events: list[Event],
        dead: list[Undecodable],
        offsets: dict[TopicPartition, OffsetAndMetadata],
        progress: _Progress,
    ) -> None:
        """One try of the batch. A try that failed after the processor finished (its emits acknowledged)
        goes on from there: processing again would count the batch's in-process counts twice."""
        if progress.processed is None:
            fresh, duplicates = self.dedupe.split_new(events)
            rejections: list[Rejection] = self._process_isolating(fresh) if fresh else []
            progress.processed = (fresh, duplicates, rejections)
        fresh, duplicates, rejections = progress.processed
        for u in dead:
            emit_dead_letter(
                self.emitter,
                self.dlq_topic,
                u.source.key,
                u.value or b"",
                dlq_headers(u.source, u.headers, u.reason, u.detail, self.name),
            )
        for r in rejections:
            emit_dead_letter(
                self.emitter,
                self.dlq_topic,
                r.event.source.key,
                r.event.raw or b"",
                dlq_headers(r.event.source, r.event.headers, r.reason, r.detail, self.name),
            )
        self.emitter.wait()
        self.dedupe.mark_done(fresh)
        try:
            self.consumer.commit(offsets=offsets)
        except CommitFailedError as exc:
            # The group rebalanced: another member redelivers these records, and
            # their done-keys make that a no-op.
            log.warning("%s commit refused after a rebalance: %s", self.name, exc)
        self._account(fresh, duplicates, dead, rejections)

    def _process_isolating(self, events: list[Event]) -> list[Rejection]:
        """process() and the acknowledgement of what it emitted; a poison record found by halving, rejected alone.

        An outage raised anywhere propagates (the whole batch is retried). A poison exception
        (workers/runtime/poison.py) splits the events in halves, each processed again, down to the one
        record that raises by itself: it is dead-lettered with its reason, the others are processed.
        Re-running a part is what a retry through an outage does too: effects are idempotent by event id.
        """
        try:
            rejections = self.processor.process(events)
            self.emitter.wait()
            return rejections
        except Exception as exc:
            if not is_poison(exc):
                raise
            if len(events) > 1:
                mid = len(events) // 2
                return self._process_isolating(events[:mid]) + self._process_isolating(events[mid:])
            event = events[0]
            log.warning(
                "%s dead-letters %s[%d]@%d (tenant %s): processing it raised %s",
                self.name,
                event.source.topic,
                event.source.partition,
                event.source.offset,
                event.tenant,
                type(exc).__name__,
                exc_info=True,
            )
            return [Rejection(event, poison_reason(exc), poison_detail(exc))]

    def _account(
        self,
        fresh: list[Event],
        duplicates: list[Event],
        dead: list[Undecodable],
        rejections: list[Rejection],
    ) -> None:
        m, w, c = self.metrics, self.name, self._child
        rejected = {id(r.event) for r in rejections}
        now = datetime.now(UTC)
        delay = c(m.delay_seconds, w)
        for e in fresh:
            outcome = "dead_letter" if id(e) in rejected else "processed"
            c(m.events, w, e.type, outcome).inc()
            delay.observe(max(0.0, (now - e.stored.received_at).total_seconds()))
        for e in duplicates:
            m.events.labels(w, e.type, "duplicate").inc()
        if duplicates:
            m.dedupe_hits.labels(w).inc(len(duplicates))
        for u in dead:
            m.events.labels(w, self.type_by_topic.get(u.source.topic, "unknown"), "dead_letter").inc()
            m.dead_letters.labels(w, u.reason).inc()
            log.warning(
                "%s dead-lettered %s[%d]@%d: %s: %s",
                w,
                u.source.topic,
                u.source.partition,
                u.source.offset,
                u.reason,
                u.detail,
            )
        for r in rejections:
            m.dead_letters.labels(w, r.reason).inc()
        m.last_commit.labels(w).set(time.time())

    def _with_retries(self, attempt: Callable[[], None], polled: dict[TopicPartition, list[Any]]) -> bool:
        """Run `attempt` until it succeeds, under the outage policy (outage.py); False when abandoned."""
        self._revoked = False
        while True:
            try:
                attempt()
                self.batch_outage.recovered()
                return True
            except Exception as exc:  # an outage: Redis, the broker, a model timing out
                delay = self.batch_outage.failed(exc)
            if not self._wait_keeping_membership(delay):
                self._rewind(polled)
                self.batch_outage.abandoned()
                return False

    def _wait_keeping_membership(self, delay: float) -> bool:
        """Sleep `delay` while heartbeating; False when the batch must be abandoned."""
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            if self.stopping.is_set() and self._grace_over():
                log.warning("%s stopping during an outage: the in-flight batch stays uncommitted", self.name)
                return False
            self._idle_poll(int(min(200, max(1, (deadline - time.monotonic()) * 1000))))
            if self._revoked:
                log.warning(
                    "%s partitions revoked during retries: batch abandoned, it will be redelivered", self.name
                )
                self.consumer.resume(*self.consumer.assignment())
                return False
        self.consumer.resume(*self.consumer.assignment())
        return True

    def _grace_over(self) -> bool:
        return (
            self._stop_requested_at is not None
            and time.monotonic() - self._stop_requested_at > self.settings.worker_shutdown_grace_s
        )

    def _halt(self, reason: str, message: str, polled: dict[TopicPartition, list[Any]]) -> None:
        self.halted = reason
        self._rewind(polled)
        self.metrics.halted.labels(self.name, reason).set(1)
        self.metrics.ready.labels(self.name).set(0)
        log.error("%s HALTED: %s", self.name, message)

    def _measure_lag(self) -> None:
        measure_lag(self.consumer, self.metrics, self.name)
