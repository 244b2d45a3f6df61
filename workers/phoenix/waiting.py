"""Scores whose trace has not reached Phoenix yet wait in Redis, and are retried from there.

A score can be consumed before its spans are in Phoenix (the forwarder and
Phoenix's own ingestion lag behind the scoring pipeline), and a trace that
never reaches Phoenix must not stall a partition. So such scores are parked
here (the offsets are committed: Redis holds them now) and retried every
`retry_interval_s` until `span_wait_s` after they were first seen.

Taking due entries leases them (their due time moves one interval ahead in
the same script), so two exporter processes do not retry the same score at
once; an exporter that dies with a lease leaves the entry due again later.
Bounded by `max_waiting`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

import redis
from pydantic import Field, TypeAdapter

from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent

# Per consumer group (two exporters feeding two Phoenix instances keep apart):
# <prefix>:waiting is a zset (score event id -> due time), <prefix>:data a hash (id -> first_seen, score).
KEY_PREFIX = "ragmon:phoenix:{group}"

ScoreEvent = FaithfulnessScoreEvent | ExclusionResultEvent
# A waiting score is stored as its JSON and validated again when it is retried.
SCORE_EVENT: TypeAdapter[ScoreEvent] = TypeAdapter(Annotated[ScoreEvent, Field(discriminator="type")])

_TAKE_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
if #due == 0 then return {} end
for _, id in ipairs(due) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
local data = redis.call('HMGET', KEYS[2], unpack(due))
local out = {}
for i, id in ipairs(due) do out[#out + 1] = id; out[#out + 1] = data[i] or false end
return out
"""


@dataclass(frozen=True)
class Waiting:
    event_id: str
    first_seen: float
    score_json: str


class WaitingRoom:
    def __init__(self, client: redis.Redis, group: str, retry_interval_s: float, limit: int) -> None:
        self._redis = client
        prefix = KEY_PREFIX.format(group=group)
        self._waiting, self._data = f"{prefix}:waiting", f"{prefix}:data"
        self._interval = retry_interval_s
        self._limit = limit
        self._take = client.register_script(_TAKE_DUE)

    def size(self) -> int:
        return int(self._redis.zcard(self._waiting))

    def park(self, entries: list[Waiting], now: float) -> int:
        """Store entries not yet waiting; return how many did not fit (dropped by the caller's count)."""
        if not entries:
            return 0
        room = max(0, self._limit - self.size())
        kept, dropped = entries[:room], len(entries) - min(room, len(entries))
        if kept:
            pipe = self._redis.pipeline(transaction=True)
            for w in kept:
                pipe.hsetnx(
                    self._data, w.event_id, json.dumps({"first_seen": w.first_seen, "score": w.score_json})
                )
                pipe.zadd(self._waiting, {w.event_id: now + self._interval}, nx=True)
            pipe.execute()
        return dropped

    def take_due(self, now: float, count: int) -> list[Waiting]:
        raw = self._take(keys=[self._waiting, self._data], args=[now, now + self._interval, count])
        out: list[Waiting] = []
        for i in range(0, len(raw), 2):
            event_id = raw[i].decode() if isinstance(raw[i], bytes) else str(raw[i])
            data = raw[i + 1]
            if not data:  # its data vanished (a manual cleanup): nothing to retry
                self.done([event_id])
                continue
            doc = json.loads(data)
            out.append(Waiting(event_id, float(doc["first_seen"]), doc["score"]))
        return out

    def done(self, event_ids: list[str]) -> None:
        if event_ids:
            pipe = self._redis.pipeline(transaction=True)
            pipe.zrem(self._waiting, *event_ids)
            pipe.hdel(self._data, *event_ids)
            pipe.execute()
