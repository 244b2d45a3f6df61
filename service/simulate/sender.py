"""Sending a scenario to the API: paced on the scenario clock, batched per tenant, several senders.

The tenant comes from the API key, so batches never mix tenants. A batch
leaves when it holds `batch_size` events or its oldest event has waited
`batch_ms`. Senders pull batches from a bounded queue: when the API slows
down, the dispatcher blocks instead of buffering without limit.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from service.contracts import vocabulary as L
from service.simulate.delivery import Deliverer, DeliveryConfig, HttpStats
from service.simulate.ledger import FAILED, Ledger
from service.simulate.records import SimEvent
from service.simulate.scenario import Scenario, ScenarioError

# Margin kept between the oldest timestamp and the API's maximum event age.
AGE_MARGIN_S = 3600.0


@dataclass(frozen=True)
class SendConfig:
    api: str  # base URL, e.g. http://127.0.0.1:8000
    keys: dict[str, str] = field(default_factory=dict)  # tenant -> API key
    default_key: str | None = None
    batch_size: int = 100
    batch_ms: float = 250.0
    senders: int = 2
    gzip: bool = False
    max_retries: int = 5
    max_retry_wait_s: float = 30.0
    timeout_s: float = 10.0
    speed: float = 1.0
    fast: bool = False  # as fast as possible: no pacing at all

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= L.MAX_EVENTS_PER_BATCH:
            raise ValueError(f"batch_size must be within 1..{L.MAX_EVENTS_PER_BATCH}")
        if self.senders < 1 or self.speed <= 0 or self.batch_ms < 0 or self.max_retries < 0:
            raise ValueError("senders >= 1, speed > 0, batch_ms >= 0 and max_retries >= 0 are required")

    def key_for(self, tenant: str) -> str:
        key = self.keys.get(tenant, self.default_key)
        if key is None:
            raise ScenarioError(
                f"no API key for tenant {tenant!r}: pass --tenant-key {tenant}=KEY or --api-key KEY"
            )
        return key

    @property
    def compressed(self) -> bool:
        return self.fast or self.speed > 1


def send_anchor(scenario: Scenario, cfg: SendConfig, now: datetime) -> datetime:
    """Where scenario second 0 lies on the real clock when sending.

    In real time it is now. Compressed, timestamps would run ahead of the real
    clock and be refused as from the future; so the scenario is placed in the
    past, by just enough that its last event is stamped "now" when it is sent.
    """
    if not cfg.compressed:
        return now
    if scenario.duration_s is None:
        raise ScenarioError(
            "duration_s: an endless scenario can only be sent in real time (speed 1, not --fast)"
        )
    span = scenario.duration_s + scenario.tail_s()
    if span > L.MAX_EVENT_AGE_S - AGE_MARGIN_S:
        raise ScenarioError(
            f"duration_s: {span:.0f} s of events cannot be compressed into the API's {L.MAX_EVENT_AGE_S} s window"
        )
    factor = 1.0 if cfg.fast else 1.0 - 1.0 / cfg.speed
    return now - timedelta(seconds=span * factor)


class _Batches:
    """Per-tenant buffers, flushed by size or age."""

    def __init__(self, cfg: SendConfig, out: queue.Queue[tuple[str, list[SimEvent]] | None]) -> None:
        self.cfg = cfg
        self.out = out
        self.buffers: dict[str, list[SimEvent]] = {}
        self.opened: dict[str, float] = {}

    def add(self, event: SimEvent) -> None:
        buf = self.buffers.setdefault(event.tenant, [])
        if not buf:
            self.opened[event.tenant] = time.monotonic()
        buf.append(event)
        if len(buf) >= self.cfg.batch_size:
            self.flush(event.tenant)

    def flush(self, tenant: str) -> None:
        buf = self.buffers.pop(tenant, [])
        self.opened.pop(tenant, None)
        if buf:
            self.out.put((tenant, buf))

    def flush_due(self) -> float:
        """Flush buffers older than batch_ms; seconds until the next one is due."""
        now, wait = time.monotonic(), float("inf")
        for tenant, opened in list(self.opened.items()):
            due = opened + self.cfg.batch_ms / 1000.0
            if due <= now:
                self.flush(tenant)
            else:
                wait = min(wait, due - now)
        return wait

    def flush_all(self) -> None:
        for tenant in list(self.buffers):
            self.flush(tenant)


def _sender(
    cfg: SendConfig,
    work: queue.Queue[tuple[str, list[SimEvent]] | None],
    anchor: datetime,
    ledger: Ledger,
    stats: HttpStats,
) -> None:
    url = cfg.api.rstrip("/") + "/v1/events"
    deliverer = Deliverer(
        DeliveryConfig(url, cfg.gzip, cfg.max_retries, cfg.max_retry_wait_s, cfg.timeout_s), ledger, stats
    )
    try:
        while (item := work.get()) is not None:
            tenant, batch = item
            try:
                deliverer.deliver(cfg.key_for(tenant), batch, anchor)
            except Exception as exc:  # noqa: BLE001 - a dead sender would hang the run; record why and go on
                for ev in batch:
                    ledger.settle(ev.id, FAILED, f"client: {type(exc).__name__}: {exc}", if_open=True)
    finally:
        deliverer.close()


def send_events(
    events: Iterable[SimEvent],
    cfg: SendConfig,
    anchor: datetime,
    ledger: Ledger,
    stop: threading.Event | None = None,
    tenants: Iterable[str] = (),
) -> HttpStats:
    """Send until the stream ends or `stop` is set; every handed-out event is settled on return."""
    for tenant in tenants:
        cfg.key_for(tenant)  # fail before sending anything when a key is missing
    stop = stop or threading.Event()
    stats = HttpStats()
    work: queue.Queue[tuple[str, list[SimEvent]] | None] = queue.Queue(maxsize=cfg.senders * 2)
    threads = [
        threading.Thread(
            target=_sender, args=(cfg, work, anchor, ledger, stats), name=f"ragmon-sim-{i}", daemon=True
        )
        for i in range(cfg.senders)
    ]
    for thread in threads:
        thread.start()
    batches = _Batches(cfg, work)
    started = time.monotonic()
    try:
        for event in events:
            due = None if cfg.fast else started + event.emit_s / cfg.speed
            if due is not None and not _wait_until(due, batches, stop):
                break
            if stop.is_set():
                break
            late = 0.0 if due is None else time.monotonic() - due
            stats.handed_out(event.emit_s, late, time.time())
            ledger.handed_out(event)
            batches.add(event)
            batches.flush_due()
    finally:
        batches.flush_all()
        for _ in threads:
            work.put(None)
        for thread in threads:
            thread.join()
    return stats


def _wait_until(target: float, batches: _Batches, stop: threading.Event) -> bool:
    """Sleep until `target` (monotonic), flushing batches that come due; False when stopped."""
    while True:
        next_flush = batches.flush_due()
        remaining = target - time.monotonic()
        if remaining <= 0:
            return True
        if stop.wait(min(remaining, next_flush)):
            return False
