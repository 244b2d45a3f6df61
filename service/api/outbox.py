"""Relays saved labels from the PostgreSQL outbox to Kafka until the broker acknowledges them.

A label is durable once its transaction commits (label row + outbox row
together); the relay then produces the stored `label` event and marks it sent.
With Kafka down the rows wait and are retried; with two API processes both
may send a row before either marks it, so a label event can reach Kafka
twice, with the same event id, which consumers deduplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
from psycopg_pool import ConnectionPool

from service.api.metrics import ApiMetrics
from service.api.producer import BrokerUnavailable, EventProducer, OutgoingRecord
from service.contracts.stored import record_headers
from service.contracts.topics import Topics, record_key

log = logging.getLogger("ragmon.api.outbox")
BATCH = 200


class LabelRelay:
    def __init__(
        self,
        pool: ConnectionPool,
        producer: EventProducer,
        topics: Topics,
        metrics: ApiMetrics,
        interval_s: float = 1.0,
        produce_timeout_s: float = 5.0,
    ) -> None:
        self.pool = pool
        self.producer = producer
        self.topics = topics
        self.metrics = metrics
        self.interval_s = interval_s
        self.produce_timeout_s = produce_timeout_s
        self.wake = asyncio.Event()

    def _unsent(self) -> list[tuple[Any, ...]]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, event_id, tenant, event FROM label_outbox WHERE sent_at IS NULL "
                "ORDER BY id LIMIT %s",
                (BATCH,),
            ).fetchall()
            pending = conn.execute("SELECT count(*) FROM label_outbox WHERE sent_at IS NULL").fetchone()
        self.metrics.label_outbox_pending.set(pending[0] if pending else 0)
        return rows

    def _mark(self, ids: list[int], sent: bool) -> None:
        column = "sent_at = now()" if sent else "attempts = attempts + 1"
        with self.pool.connection() as conn:
            conn.execute(f"UPDATE label_outbox SET {column} WHERE id = ANY(%s)", (ids,))  # noqa: S608 - fixed text

    def _record(self, event_id: Any, tenant: str, event: dict[str, Any]) -> OutgoingRecord:
        headers = record_headers(str(event_id), "label", tenant)
        return OutgoingRecord(
            self.topics.labels, record_key("label", tenant, event["body"]), orjson.dumps(event), headers
        )

    async def relay_once(self) -> int:
        rows = await asyncio.to_thread(self._unsent)
        if not rows:
            return 0
        ids = [r[0] for r in rows]
        try:
            await self.producer.produce(
                [self._record(r[1], r[2], r[3]) for r in rows], self.produce_timeout_s
            )
        except BrokerUnavailable as exc:
            log.warning("%d label events wait in the outbox: %s", len(rows), exc)
            await asyncio.to_thread(self._mark, ids, False)
            return 0
        await asyncio.to_thread(self._mark, ids, True)
        self.metrics.label_outbox_relayed.inc(len(ids))
        return len(ids)

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.interval_s)
            self.wake.clear()
            try:
                while await self.relay_once() == BATCH:
                    pass
            except Exception as exc:  # the store being down must not end the relay
                log.warning("label relay failed, retrying: %s", exc)
