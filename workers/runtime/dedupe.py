"""Idempotency by event id: Redis keys that say "this worker finished this event".

A key is written only after the event's effects and before its offset is
committed. A crash in between redelivers events whose keys exist: they are
skipped. A crash before the keys are written redelivers events that are
processed again, which is why effects kept in Redis must be idempotent on
their own (see workers/runtime/types.py).
"""

from __future__ import annotations

import redis

from workers.runtime.types import Event

_MARK_DONE = """
for _, key in ipairs(KEYS) do
  redis.call('SET', key, '1', 'EX', ARGV[1])
end
return #KEYS
"""


class Dedupe:
    def __init__(self, client: redis.Redis, worker: str, ttl_s: int) -> None:
        self._client = client
        self._prefix = f"ragmon:done:{worker}:"
        self._ttl_s = ttl_s
        self._mark = client.register_script(_MARK_DONE)

    def key(self, event_id: str) -> str:
        return self._prefix + event_id

    def split_new(self, events: list[Event]) -> tuple[list[Event], list[Event]]:
        """(events to process, events already done). Repeats inside the batch count as done."""
        if not events:
            return [], []
        done_flags = self._client.mget([self.key(e.id) for e in events])
        fresh: list[Event] = []
        seen: set[str] = set()
        duplicates: list[Event] = []
        for event, flag in zip(events, done_flags, strict=True):
            if flag is not None or event.id in seen:
                duplicates.append(event)
            else:
                seen.add(event.id)
                fresh.append(event)
        return fresh, duplicates

    def mark_done(self, events: list[Event]) -> None:
        if not events:
            return
        # One command for the batch: packing one SET per event cost more than the work it records.
        self._mark(keys=[self.key(e.id) for e in events], args=[self._ttl_s])
