"""Durable producing for the API: a 2xx only after the broker acknowledged every record.

kafka-python's producer is thread-based: `send` serialises into an
accumulator and a sender thread talks to the broker. Each batch's sends run
in a worker thread (so a metadata wait never blocks the event loop), and the
acknowledgement futures are bridged to asyncio.

A record the broker refuses for itself (over its size limit, invalid) is that
record's failure only: it is reported by index and the producer stays up (see
RECORD_ERRORS). A record over MAX_RECORD_BYTES is refused before it is sent.
When the broker itself fails the producer is marked down and requests fail fast with
503 until a probe sees the broker again; then topics are re-ensured (a
memory-only broker comes back empty and would auto-create them with the wrong
partition count) and a fresh producer replaces the old one, whose metadata and
producer state belong to the broker that went away.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from kafka import KafkaProducer
from kafka import errors as kafka_errors
from kafka.errors import KafkaError

from service.api.kafka_private import append_records, drop_pending, on_completion, partitions_known
from service.contracts import vocabulary as L
from service.contracts.kafka import ensure_topics
from service.contracts.settings import CommonSettings

log = logging.getLogger("ragmon.api.producer")


class OutgoingRecord(NamedTuple):
    """One record to produce; a tuple, as kafka_private.append_records takes it (no copy per record)."""

    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


class BrokerUnavailable(Exception):
    """The broker could not acknowledge; the client should retry later."""


# Errors about one record, not the broker: retrying the record cannot help and the broker is fine.
RECORD_ERRORS: tuple[type[KafkaError], ...] = (
    kafka_errors.MessageSizeTooLargeError,
    kafka_errors.RecordListTooLargeError,
    kafka_errors.InvalidRecordError,
    kafka_errors.CorruptRecordError,
)


def record_bytes(record: OutgoingRecord) -> int:
    """The bytes a record carries (key, value, headers): what MAX_RECORD_BYTES bounds."""
    return len(record.key) + len(record.value) + sum(len(k) + len(v) for k, v in record.headers)


def oversized(records: list[OutgoingRecord], limit: int = L.MAX_RECORD_BYTES) -> set[int]:
    """Indexes of the records over the per-record limit (a cheap length check per record)."""
    return {
        i
        for i, r in enumerate(records)
        if len(r.value) + len(r.key) > limit - 1024 and record_bytes(r) > limit
    }


def broker_reachable(settings: CommonSettings, timeout_s: float = 1.0) -> bool:
    for server in settings.bootstrap_list:
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
                return True
        except OSError:
            continue
    return False


class _AckTracker:
    """Counts acknowledgements in the sender thread; wakes the event loop once.

    One wake-up per batch instead of one per record keeps the event loop free
    for requests at thousands of records a second. The count is an
    itertools.count, whose next() is one indivisible step under the GIL, so
    no lock is taken per record; a second wake-up (an error racing the last
    acknowledgement) finds the future already settled.
    """

    def __init__(self, pending: int, loop: asyncio.AbstractEventLoop, done: asyncio.Future[None]) -> None:
        self._pending = pending
        self._settled = itertools.count(1)
        self._loop = loop
        self._done = done
        self.error: BaseException | None = None
        self.record_failures = 0

    def _wake(self) -> None:
        self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        if not self._done.done():
            self._done.set_result(None)

    def ack(self, _metadata: object) -> None:
        if next(self._settled) == self._pending:
            self._wake()

    def fail(self, exc: BaseException) -> None:
        if isinstance(exc, RECORD_ERRORS):
            # One record's problem: wait for the others, then the caller asks which failed.
            self.record_failures += 1
            if next(self._settled) == self._pending:
                self._wake()
        elif self.error is None:
            self.error = exc
            self._wake()


class EventProducer:
    def __init__(
        self,
        settings: CommonSettings,
        *,
        compression: str = "lz4",
        idempotence: bool = False,
        delivery_timeout_s: float = 8.0,
    ) -> None:
        self._settings = settings
        self._compression = None if compression == "none" else compression
        self._idempotence = idempotence
        self._delivery_timeout_ms = int(delivery_timeout_s * 1000)
        self._lock = threading.Lock()
        self._producer: KafkaProducer | None = None
        self.up = False
        self.last_error = "not started"
        # Set while down, so requests waiting for acknowledgements give up at
        # once instead of waiting out the delivery timeout.
        self._down: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._down = asyncio.Event()
        if not self.up:
            self._down.set()

    def _signal(self, down: bool) -> None:
        if self._loop is None or self._down is None:
            return
        self._loop.call_soon_threadsafe(self._down.set if down else self._down.clear)

    def _new_producer(self) -> KafkaProducer:
        return KafkaProducer(
            bootstrap_servers=self._settings.bootstrap_list,
            client_id="ragmon-api",
            acks="all",
            enable_idempotence=self._idempotence,
            compression_type=self._compression,
            linger_ms=2,
            batch_size=512 * 1024,
            max_request_size=16 * 1024 * 1024,
            max_block_ms=2000,
            request_timeout_ms=max(1000, self._delivery_timeout_ms // 2),
            delivery_timeout_ms=self._delivery_timeout_ms,
            retries=5,
            retry_backoff_ms=100,
            reconnect_backoff_max_ms=1000,
        )

    def start(self) -> None:
        """Ensure topics and connect; stays down (and keeps probing) if the broker is not there yet."""
        self.try_recover()

    def try_recover(self) -> bool:
        if not broker_reachable(self._settings):
            self._mark_down("broker not reachable at " + self._settings.kafka_bootstrap_servers)
            return False
        try:
            ensure_topics(self._settings)
            fresh = self._new_producer()
        except KafkaError as exc:
            self._mark_down(f"broker reachable but not ready: {exc}")
            return False
        with self._lock:
            old, self._producer = self._producer, fresh
            self.up = True
            self.last_error = ""
        self._signal(down=False)
        if old is not None:
            threading.Thread(target=_discard, args=(old,), daemon=True).start()
        log.info("producer connected to %s", self._settings.kafka_bootstrap_servers)
        return True

    def _mark_down(self, reason: str) -> None:
        if self.up:
            log.warning("producer down: %s", reason)
        with self._lock:
            stale, self._producer = self._producer, None
            self.up = False
            self.last_error = reason
        self._signal(down=True)
        if stale is not None:
            # Its records belong to requests answered 503; if it kept retrying them, they would reach
            # a broker that came back empty before the topics are re-created (see _discard).
            threading.Thread(target=_discard, args=(stale,), daemon=True).start()

    def check_broker(self) -> None:
        """Probe while up: a broker that stopped answering marks the producer down at once."""
        if self.up and not broker_reachable(self._settings):
            self._mark_down(
                "broker stopped accepting connections at " + self._settings.kafka_bootstrap_servers
            )

    def _append_ready(self, records: list[OutgoingRecord]) -> list[object] | None:
        """The records appended on the event loop's thread, or None when that could block.

        When the producer already knows every topic's partitions, appending cannot wait: the
        records go straight into the producer's accumulator (kafka_private.append_records: what
        `send` does, without its per-record checks and wake-ups, about a third of its cost).
        Handing them to a thread instead makes the two threads trade the GIL under load, which
        cost several times the append itself. A topic without metadata (first use, after a
        broker restart) goes through a thread and `send`, because there `send` waits up to
        max_block_ms.
        """
        producer = self._producer
        if producer is None or not partitions_known(producer, {r.topic for r in records}):
            return None
        return append_records(producer, records)

    def _send_all(self, records: list[OutgoingRecord]) -> list[object]:
        producer = self._producer
        if producer is None:
            raise BrokerUnavailable(self.last_error or "producer not started")
        return [producer.send(r.topic, key=r.key, value=r.value, headers=r.headers) for r in records]

    async def produce(self, records: list[OutgoingRecord], timeout_s: float) -> set[int]:
        """Return once every record is acknowledged (acks=all) or refused for itself; raise
        BrokerUnavailable when the broker could not acknowledge.

        Returns the indexes of the records refused for themselves (over MAX_RECORD_BYTES, never
        sent; or refused by the broker as too large or invalid): nothing else of the batch, and no
        other request, is affected by them.
        """
        if not self.up:
            raise BrokerUnavailable(self.last_error)
        refused = oversized(records)
        if refused:
            kept = [i for i in range(len(records)) if i not in refused]
            return refused | {kept[i] for i in await self.produce([records[i] for i in kept], timeout_s)}
        loop = asyncio.get_running_loop()
        try:
            futures = self._append_ready(records)
            if futures is None:
                futures = await asyncio.to_thread(self._send_all, records)
        except KafkaError as exc:
            self._mark_down(f"send failed: {exc}")
            raise BrokerUnavailable(str(exc)) from exc
        if not futures:
            return set()
        done = loop.create_future()
        tracker = _AckTracker(len(futures), loop, done)
        on_completion(futures, tracker.ack, tracker.fail)
        waiter = asyncio.ensure_future(self._down.wait()) if self._down is not None else None
        waiting = {done} if waiter is None else {done, waiter}
        try:
            finished, _ = await asyncio.wait(waiting, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if waiter is not None:
                waiter.cancel()
        if done not in finished:
            if waiter is not None and waiter in finished:
                raise BrokerUnavailable(
                    f"broker went away while waiting for acknowledgement: {self.last_error}"
                )
            self._mark_down(f"no acknowledgement within {timeout_s:.1f}s")
            raise BrokerUnavailable("broker did not acknowledge in time")
        if tracker.error is not None:
            self._mark_down(f"produce failed: {tracker.error}")
            raise BrokerUnavailable(str(tracker.error))
        if not tracker.record_failures:
            return set()
        failed = {
            i for i, f in enumerate(futures) if isinstance(getattr(f, "exception", None), RECORD_ERRORS)
        }
        log.warning(
            "broker refused %d record(s) for themselves (size or validity); the producer stays up",
            len(failed),
        )
        return failed

    def close(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
            self.up = False
        if producer is not None:
            try:
                producer.flush(timeout=timeout_s)
            except KafkaError:
                log.warning("records still unacknowledged at shutdown")
            producer.close(timeout=timeout_s)


def _discard(producer: KafkaProducer) -> None:
    """Stop a producer without sending the records it still holds.

    Every one of them belongs to a request that was answered 503 (the client retries it). Sent
    into a restarted memory-only broker, such stale retries race the re-creation of the topics:
    Tansu then fails the fresh producer's first writes (UnknownError) or advertises an offset it
    cannot serve. kafka-python's close(timeout=0) flushes first and raises while records are
    pending, leaving the sender running, so the sender is force-closed first.
    """
    drop_pending(producer)  # no public way to drop pending records
    try:
        producer.close(timeout=1)
    except KafkaError as exc:
        log.debug("discarded producer did not close cleanly: %s", exc)


async def supervise(
    producer: EventProducer, interval_s: float = 1.0, report: Callable[[bool], None] | None = None
) -> None:
    """Background task: while the producer is down, probe the broker and recover.

    `report` is told the state every interval (each API process keeps its own gauge current).
    """
    producer.bind_loop()
    while True:
        if report is not None:
            report(producer.up)
        await asyncio.sleep(interval_s)
        if producer.up:
            await asyncio.to_thread(producer.check_broker)
        if not producer.up:
            started = time.monotonic()
            recovered = await asyncio.to_thread(producer.try_recover)
            if recovered:
                log.info("broker back after probe of %.2fs", time.monotonic() - started)
