"""Scores whose trace has not reached Phoenix yet wait in Redis, and are retried from there.

A score can be consumed before its spans are in Phoenix (the forwarder and
Phoenix's own ingestion lag behind the scoring pipeline), and a trace that
never reaches Phoenix must not stall a partition. So such scores are parked
here (the offsets are committed: Redis holds them now) and retried every
`retry_interval_s` until `span_wait_s` after they were first seen.

Taking due entries leases them (their due time moves one interval ahead in
the same script), so two exporter processes do not retry the same score at
once; an exporter that dies with a lease leaves the entry due again later.

Each tenant's scores wait in a set of their own (workers/runtime/fairdue.py): a retry takes
equal shares of the tenants with scores due, and a tenant holds at most `max_waiting_per_tenant`
of the `max_waiting` in all, so one tenant's flood of early scores neither delays another
tenant's retries nor takes its room. The one set of an older version (`<prefix>:waiting`) is moved
into the tenants' sets at the first retry; its bare event ids (the format before the tenant was in
the member) form a set of their own and are retried like the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

import redis
from pydantic import Field, TypeAdapter

from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
from workers.runtime.fairdue import REINDEX_LUA, TenantDueSets

# Per consumer group (two exporters feeding two Phoenix instances keep apart): <prefix>:waiting:<tenant>
# a zset (member "<tenant>/<score event id>" -> due time), <prefix>:due the tenants by their earliest
# (workers/runtime/fairdue.py), <prefix>:data a hash (member -> first_seen, score).
KEY_PREFIX = "ragmon:phoenix:{group}"

ScoreEvent = FaithfulnessScoreEvent | ExclusionResultEvent
# A waiting score is stored as its JSON and validated again when it is retried.
SCORE_EVENT: TypeAdapter[ScoreEvent] = TypeAdapter(Annotated[ScoreEvent, Field(discriminator="type")])

# KEYS: the data hash, the index. ARGV: due time, set prefix, then per entry: tenant, member, data.
# An entry already waiting keeps its data and due time.
_PARK = (
    REINDEX_LUA
    + """
local touched = {}
for i = 3, #ARGV, 3 do
  redis.call('HSETNX', KEYS[1], ARGV[i + 1], ARGV[i + 2])
  redis.call('ZADD', ARGV[2] .. ARGV[i], 'NX', ARGV[1], ARGV[i + 1])
  touched[ARGV[i]] = true
end
for tenant in pairs(touched) do reindex(ARGV[2] .. tenant, KEYS[2], tenant) end
"""
)

# KEYS: the data hash, the index. ARGV: set prefix, then tenant, member pairs.
_DONE = (
    REINDEX_LUA
    + """
local touched = {}
for i = 2, #ARGV, 2 do
  redis.call('ZREM', ARGV[1] .. ARGV[i], ARGV[i + 1])
  redis.call('HDEL', KEYS[1], ARGV[i + 1])
  touched[ARGV[i]] = true
end
for tenant in pairs(touched) do reindex(ARGV[1] .. tenant, KEYS[2], tenant) end
"""
)


def tenant_of(member: str) -> str:
    """A member's tenant: its text before the first "/" (a bare event id of the older format: itself)."""
    tenant, sep, _ = member.partition("/")
    return tenant if sep else member


@dataclass(frozen=True)
class Waiting:
    event_id: str
    first_seen: float
    score_json: str


class WaitingRoom:
    def __init__(
        self,
        client: redis.Redis,
        group: str,
        retry_interval_s: float,
        limit: int,
        limit_per_tenant: int | None = None,
    ) -> None:
        self._redis = client
        prefix = KEY_PREFIX.format(group=group)
        self._data = f"{prefix}:data"
        self._due = TenantDueSets.replacing(client, prefix, "waiting")
        self._interval = retry_interval_s
        self._limit = limit
        self._limit_per_tenant = limit if limit_per_tenant is None else min(limit, limit_per_tenant)
        self._park = client.register_script(_PARK)
        self._done = client.register_script(_DONE)

    def size(self) -> int:
        return self._due.size()

    def park(self, entries: list[Waiting], now: float) -> list[int]:
        """Store entries not yet waiting, within the room left in all and to each tenant; return the
        positions of those that did not fit (dropped, counted by the caller)."""
        if not entries:
            return []
        tenants = sorted({tenant_of(w.event_id) for w in entries})
        pipe = self._redis.pipeline(transaction=False)
        for tenant in tenants:
            pipe.zcard(self._due.key(tenant))
        held = dict(zip(tenants, pipe.execute(), strict=True))
        room = max(0, self._limit - self.size())
        args: list[str | float] = [now + self._interval, self._due.set_prefix]
        kept, dropped = 0, []
        for i, w in enumerate(entries):
            tenant = tenant_of(w.event_id)
            if kept >= room or held[tenant] >= self._limit_per_tenant:
                dropped.append(i)
                continue
            held[tenant] += 1
            kept += 1
            args += [tenant, w.event_id, json.dumps({"first_seen": w.first_seen, "score": w.score_json})]
        if kept:
            self._park(keys=[self._data, self._due.index_key], args=args)
        return dropped

    def take_due(self, now: float, count: int) -> list[Waiting]:
        """Up to `count` due entries, shared between the tenants with some; each is leased one interval."""
        due = self._due.claim(now, count, lease_s=self._interval)
        if not due:
            return []
        data = self._redis.hmget(self._data, [member for _, member in due])
        out: list[Waiting] = []
        for (_, event_id), raw in zip(due, data, strict=True):
            if not raw:  # its data vanished (a manual cleanup): nothing to retry
                self.done([event_id])
                continue
            doc = json.loads(raw)
            out.append(Waiting(event_id, float(doc["first_seen"]), doc["score"]))
        return out

    def done(self, event_ids: list[str]) -> None:
        if event_ids:
            args = [self._due.set_prefix]
            for event_id in event_ids:
                args += [tenant_of(event_id), event_id]
            self._done(keys=[self._data, self._due.index_key], args=args)
