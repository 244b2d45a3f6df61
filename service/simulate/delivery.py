"""Delivering one batch to POST /v1/events and settling each event's outcome.

202: all accepted. 207: per-event results, the listed rejections are
rejected and the rest accepted. 429/503: wait Retry-After and resend the same
bytes (event ids are idempotency keys, so a resend after a lost response is
counted once downstream). Other 5xx and network errors: back off and resend.
Other 4xx: the batch is rejected as a whole; resending cannot help.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import orjson

from service.simulate.ledger import ACCEPTED, FAILED, REJECTED, Ledger
from service.simulate.records import SimEvent

DEFAULT_RETRY_AFTER_S = 1.0
LATENCY_WINDOW = 10_000
PACE_EVERY_S = 5.0  # scenario seconds between two points of the pace record
PACE_POINTS = 10_000  # the latest points only: an endless run must not grow the record without bound
ACCEPTED_STATUSES = {"accepted", "ok", "created", "duplicate"}


@dataclass
class HttpStats:
    requests: int = 0
    by_status: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    retry_wait_s: float = 0.0
    network_errors: int = 0
    failed_batches: int = 0
    rejected_batches: int = 0
    inconsistent_207: int = 0  # the body's "accepted" disagreed with the per-event results
    bytes_sent: int = 0
    # The latest requests only: an endless run must not grow this without bound.
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    # When events were really handed to the senders: (scenario seconds, Unix seconds), one point every
    # PACE_EVERY_S of scenario time, and how late against the schedule the latest hand-out ran. A sender
    # that falls behind (a slow API) shifts every later phase in wall time; the record says by how much.
    pace: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=PACE_POINTS))
    max_late_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def handed_out(self, emit_s: float, late_s: float, unix_s: float) -> None:
        """Notes one hand-out (called by the scheduling thread only)."""
        self.max_late_s = max(self.max_late_s, late_s)
        if not self.pace or emit_s - self.pace[-1][0] >= PACE_EVERY_S:
            self.pace.append((emit_s, unix_s))

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            lat = sorted(self.latencies_ms)
            return {
                "requests": self.requests,
                "by_status": dict(sorted(self.by_status.items())),
                "retries": self.retries,
                "retry_wait_s": round(self.retry_wait_s, 3),
                "network_errors": self.network_errors,
                "failed_batches": self.failed_batches,
                "rejected_batches": self.rejected_batches,
                "inconsistent_207": self.inconsistent_207,
                "bytes_sent": self.bytes_sent,
                "pace": {
                    "max_late_s": round(self.max_late_s, 3),
                    "points": [[round(e, 3), round(u, 3)] for e, u in self.pace],
                },
                "latency_ms": {
                    "p50": _quantile(lat, 0.5),
                    "p99": _quantile(lat, 0.99),
                    "max": _quantile(lat, 1.0),
                },
            }


def wall_time_at(points: list[list[float]], scenario_s: float) -> float:
    """Unix time at which the sender handed out scenario second `scenario_s`, from a pace record.

    Linear between the two points around it; before the first or after the last, the nearest
    point's offset is carried (the sender's lateness there is the best guess).
    """
    if not points:
        raise ValueError("an empty pace record: nothing was sent")
    if scenario_s <= points[0][0]:
        return points[0][1] + (scenario_s - points[0][0])
    for (e0, u0), (e1, u1) in zip(points, points[1:], strict=False):
        if e0 <= scenario_s <= e1:
            return u0 + (u1 - u0) * (scenario_s - e0) / (e1 - e0) if e1 > e0 else u0
    return points[-1][1] + (scenario_s - points[-1][0])


def _quantile(ordered: list[float], q: float) -> float | None:
    """Nearest-rank quantile of a sorted list (None when empty)."""
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


@dataclass(frozen=True)
class DeliveryConfig:
    url: str  # the full POST /v1/events URL
    gzip: bool = False
    max_retries: int = 5
    max_retry_wait_s: float = 30.0
    timeout_s: float = 10.0


def retry_after_s(value: str | None, cap: float) -> float:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return DEFAULT_RETRY_AFTER_S
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (
                parsedate_to_datetime(value) - datetime.now(parsedate_to_datetime(value).tzinfo)
            ).total_seconds()
        except (TypeError, ValueError):
            seconds = DEFAULT_RETRY_AFTER_S
    return min(max(seconds, 0.0), cap)


def _is_accepted(status: Any) -> bool:
    if isinstance(status, int) and not isinstance(status, bool):
        return 200 <= status < 300
    return str(status).lower() in ACCEPTED_STATUSES


class Deliverer:
    """One sender's HTTP client (keep-alive); settles outcomes in the ledger."""

    def __init__(self, cfg: DeliveryConfig, ledger: Ledger, stats: HttpStats) -> None:
        self.cfg = cfg
        self.ledger = ledger
        self.stats = stats
        self.client = httpx.Client(timeout=cfg.timeout_s)

    def close(self) -> None:
        self.client.close()

    def deliver(self, api_key: str, batch: list[SimEvent], anchor: datetime) -> None:
        payload = orjson.dumps({"events": [ev.envelope(anchor) for ev in batch]})
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        if self.cfg.gzip:
            payload = gzip.compress(payload, compresslevel=1)
            headers["Content-Encoding"] = "gzip"
        for attempt in range(self.cfg.max_retries + 1):
            wait = self._attempt(payload, headers, batch, attempt)
            if wait is None:
                return
            with self.stats.lock:
                self.stats.retries += 1
                self.stats.retry_wait_s += wait
            time.sleep(wait)

    def _attempt(
        self, payload: bytes, headers: dict[str, str], batch: list[SimEvent], attempt: int
    ) -> float | None:
        """Send once; the delay before a retry, or None when every event is settled."""
        last = attempt == self.cfg.max_retries
        started = time.perf_counter()
        try:
            resp = self.client.post(self.cfg.url, content=payload, headers=headers)
        except httpx.TransportError as exc:
            with self.stats.lock:
                self.stats.network_errors += 1
            if last:
                self._give_up(batch, f"network: {type(exc).__name__}: {exc}")
                return None
            return min(0.25 * 2**attempt, self.cfg.max_retry_wait_s)
        with self.stats.lock:
            self.stats.requests += 1
            self.stats.by_status[str(resp.status_code)] += 1
            self.stats.bytes_sent += len(payload)
            self.stats.latencies_ms.append((time.perf_counter() - started) * 1000.0)
        code = resp.status_code
        if code == 202:
            for ev in batch:
                self.ledger.settle(ev.id, ACCEPTED)
            return None
        if code == 207:
            self._settle_207(resp, batch)
            return None
        if code in (429, 503) or code >= 500:
            if last:
                self._give_up(batch, f"HTTP {code} after {self.cfg.max_retries} retries")
                return None
            return retry_after_s(resp.headers.get("Retry-After"), self.cfg.max_retry_wait_s)
        with self.stats.lock:
            self.stats.rejected_batches += 1
        for ev in batch:
            self.ledger.settle(ev.id, REJECTED, f"HTTP {code}: {resp.text[:300]}")
        return None

    def _give_up(self, batch: list[SimEvent], why: str) -> None:
        with self.stats.lock:
            self.stats.failed_batches += 1
        for ev in batch:
            self.ledger.settle(ev.id, FAILED, why)

    def _settle_207(self, resp: httpx.Response, batch: list[SimEvent]) -> None:
        try:
            data = resp.json()
            results = _results_by_position(data["results"], batch)
            claimed = data.get("accepted")
        except (ValueError, TypeError, KeyError, AttributeError):
            # Which events were kept is unknowable: none is counted as accepted.
            self._give_up(batch, f"HTTP 207 without readable results: {resp.text[:200]}")
            return
        accepted = 0
        for pos, ev in enumerate(batch):
            result = results.get(pos)
            if result is None or _is_accepted(result.get("status")):
                self.ledger.settle(ev.id, ACCEPTED)
                accepted += 1
            else:
                self.ledger.settle(ev.id, REJECTED, str(result.get("error") or result.get("status")))
        if claimed != accepted:
            with self.stats.lock:
                self.stats.inconsistent_207 += 1


def _results_by_position(results: list[dict[str, Any]], batch: list[SimEvent]) -> dict[int, dict[str, Any]]:
    """Per-event results keyed by batch position: by `index` when given, else by `id`."""
    position = {ev.id: pos for pos, ev in enumerate(batch)}
    out: dict[int, dict[str, Any]] = {}
    for result in results:
        index = result.get("index")
        if isinstance(index, int) and 0 <= index < len(batch):
            out[index] = result
        elif str(result.get("id")) in position:
            out[position[str(result["id"])]] = result
    return out
