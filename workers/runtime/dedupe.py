"""Idempotency by (tenant, event id): Redis keys that say "this worker finished this tenant's event".

A key is written only after the event's effects and before its offset is
committed. A crash in between redelivers events whose keys exist: they are
skipped. A crash before the keys are written redelivers events that are
processed again, which is why effects kept in Redis must be idempotent on
their own (see workers/runtime/types.py).

The key is `ragmon:done:<worker>:<tenant>:<event id>` (a tenant is a slug
without ':'). Event ids are chosen by clients, so two tenants may send the
same one: each is done for its own tenant only.

Upgrade from the version whose key was `ragmon:done:<worker>:<event id>`:
records delivered before the upgrade and redelivered after it (uncommitted
at a restart, a rebalance) must still be skipped. So for one dedupe TTL after
the first upgraded process of a worker started (`ragmon:dedupe-scoped-since:<worker>`,
set once), an old key found for an event id makes it a duplicate too; after
that no old key can exist (they expire) and only the scoped keys are read.
During that window an id some tenant finished under the old version is
still taken as done for every tenant, as it was before the upgrade.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import redis

from workers.runtime.types import Event

_MARK_DONE = """
for _, key in ipairs(KEYS) do
  redis.call('SET', key, '1', 'EX', ARGV[1])
end
return #KEYS
"""


class Dedupe:
    def __init__(
        self, client: redis.Redis, worker: str, ttl_s: int, clock: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._prefix = f"ragmon:done:{worker}:"
        self._since_key = f"ragmon:dedupe-scoped-since:{worker}"
        self._ttl_s = ttl_s
        self._clock = clock
        self._legacy_until: float | None = None  # read once from Redis: it never changes
        self._mark = client.register_script(_MARK_DONE)

    def key(self, tenant: str, event_id: str) -> str:
        return f"{self._prefix}{tenant}:{event_id}"

    def legacy_key(self, event_id: str) -> str:
        """The key of the version before tenant scoping (read only, for one TTL after the upgrade)."""
        return self._prefix + event_id

    def _read_legacy(self) -> bool:
        if self._legacy_until is None:
            self._client.set(self._since_key, str(self._clock()), nx=True)
            since = self._client.get(self._since_key)
            self._legacy_until = float(since or self._clock()) + self._ttl_s
        return self._clock() < self._legacy_until

    def split_new(self, events: list[Event]) -> tuple[list[Event], list[Event]]:
        """(events to process, events already done). Repeats inside the batch count as done."""
        if not events:
            return [], []
        keys = [self.key(e.tenant, e.id) for e in events]
        legacy = self._read_legacy()
        if legacy:
            keys += [self.legacy_key(e.id) for e in events]
        flags = self._client.mget(keys)
        n = len(events)
        fresh: list[Event] = []
        seen: set[tuple[str, str]] = set()
        duplicates: list[Event] = []
        for i, event in enumerate(events):
            scoped = (event.tenant, event.id)
            done = flags[i] is not None or (legacy and flags[n + i] is not None)
            if done or scoped in seen:
                duplicates.append(event)
            else:
                seen.add(scoped)
                fresh.append(event)
        return fresh, duplicates

    def mark_done(self, events: list[Event]) -> None:
        if not events:
            return
        # One command for the batch: packing one SET per event cost more than the work it records.
        self._mark(keys=[self.key(e.tenant, e.id) for e in events], args=[self._ttl_s])
