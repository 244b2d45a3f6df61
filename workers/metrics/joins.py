"""Joining feedback to its trace through Redis, whichever arrives first.

Both directions are single Lua scripts, so two worker processes handling a
trace and its feedback at the same moment cannot both miss each other: the
trace side stores its join info and takes every parked feedback atomically;
the feedback side reads the join info or parks itself atomically. Parked
feedback is counted exactly once, by whoever removes it from the park
(a trace arriving, or the sweeper declaring it unjoined); the trace event that
took it gets it again when it is retried (`ragmon:join:taken:<tenant>:<trace>`,
kept as long as the join info), since a retry follows a try whose counts were
never applied.

The same scripts mark, per trace, the first feedback of each kind and the first
of any kind (a hash field holding that event's id): the "traces with at least one
copy / edit / citation click / any feedback" counts. A redelivered event finds its
own id there and is first again, so a retried batch counts what the first try
would have; a second event of the same kind on the trace is not first.

Parked feedback waits in its tenant's own deadline set (workers/runtime/fairdue.py): the sweeper takes
equal shares of the tenants with feedback past its wait, so a tenant parking feedback for traces that
never come delays no other tenant's unjoined counts. The one set of an older version
(`<prefix>:deadlines`) is moved into the tenants' sets at the first sweep.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from workers.runtime.fairdue import REINDEX_LUA, TenantDueSets

# First of its kind on the trace (1) or not (0): the field keeps the first event's id.
_FIRST_OF = """
local function first_of(key, field, event_id, ttl)
  if redis.call('HSETNX', key, field, event_id) == 1 then
    redis.call('EXPIRE', key, ttl)
    return 1
  end
  if redis.call('HGET', key, field) == event_id then return 1 end
  return 0
end
"""

# KEYS: info, park, the tenant's deadline set, firsts, the deadline index, taken. ARGV: payload, ttl, member
# prefix, tenant, the trace's event id.
# The feedback a trace event takes out of the park is kept (`taken`) under that event's id: when the reply is
# lost (Redis slow or gone after running the script) the runtime retries the same event, and the retry takes
# the same feedback again instead of finding the park empty, so it is counted once, not never.
_TRACE_ARRIVES = (
    _FIRST_OF
    + REINDEX_LUA
    + """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
local parked = redis.call('HGETALL', KEYS[2])
if #parked > 0 then
  redis.call('DEL', KEYS[2])
  for i = 1, #parked, 2 do
    redis.call('ZREM', KEYS[3], ARGV[3] .. parked[i])
  end
  reindex(KEYS[3], KEYS[5], ARGV[4])
  redis.call('SET', KEYS[6], cjson.encode({ARGV[5], parked}), 'EX', ARGV[2])
else
  local taken = redis.call('GET', KEYS[6])
  if taken then
    local kept = cjson.decode(taken)
    if kept[1] == ARGV[5] then parked = kept[2] end
  end
end
local firsts = {}
for i = 1, #parked, 2 do
  local kind = tostring(cjson.decode(parked[i + 1])['kind'])
  firsts[#firsts + 1] = first_of(KEYS[4], kind, parked[i], ARGV[2])
  firsts[#firsts + 1] = first_of(KEYS[4], '*', parked[i], ARGV[2])
end
return {parked, firsts}
"""
)

# KEYS: as _TRACE_ARRIVES. ARGV: event id, payload, park ttl, deadline, member prefix, kind, tenant.
_FEEDBACK_ARRIVES = (
    _FIRST_OF
    + REINDEX_LUA
    + """
local info = redis.call('GET', KEYS[1])
if info then
  local ttl = redis.call('TTL', KEYS[1])
  if ttl < 1 then ttl = 1 end
  return {info, first_of(KEYS[4], ARGV[6], ARGV[1], ttl), first_of(KEYS[4], '*', ARGV[1], ttl)}
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5] .. ARGV[1])
reindex(KEYS[3], KEYS[5], ARGV[7])
return false
"""
)

# KEYS: park, the tenant's deadline set, the deadline index. ARGV: event id, member, tenant.
_CLAIM_EXPIRED = (
    REINDEX_LUA
    + """
redis.call('ZREM', KEYS[2], ARGV[2])
reindex(KEYS[2], KEYS[3], ARGV[3])
local payload = redis.call('HGET', KEYS[1], ARGV[1])
if payload then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return payload
end
return false
"""
)


@dataclass(frozen=True)
class JoinInfo:
    variant: str
    release: str | None
    intent: str | None
    errored: bool = False  # the trace's request failed: its feedback stays out of the quality rates


@dataclass(frozen=True)
class ParkedFeedback:
    event_id: str
    payload: dict[str, object]
    first_of_kind: bool = False  # the trace's first feedback of this kind
    first_of_any: bool = False  # the trace's first feedback of any kind


@dataclass(frozen=True)
class Joined:
    info: JoinInfo
    first_of_kind: bool
    first_of_any: bool


class FeedbackJoin:
    def __init__(
        self, client: redis.Redis, join_ttl_s: int, park_s: int, prefix: str = "ragmon:join"
    ) -> None:
        self._client = client
        self._join_ttl_s = join_ttl_s
        self._park_s = park_s
        self._prefix = prefix
        self._deadlines = TenantDueSets.replacing(client, prefix, "deadlines", separator="\x1f")
        self._trace_script = client.register_script(_TRACE_ARRIVES)
        self._feedback_script = client.register_script(_FEEDBACK_ARRIVES)
        self._claim_script = client.register_script(_CLAIM_EXPIRED)

    def _info_key(self, tenant: str, trace_id: str) -> str:
        return f"{self._prefix}:info:{tenant}:{trace_id}"

    def _park_key(self, tenant: str, trace_id: str) -> str:
        return f"{self._prefix}:park:{tenant}:{trace_id}"

    def _firsts_key(self, tenant: str, trace_id: str) -> str:
        return f"{self._prefix}:firsts:{tenant}:{trace_id}"

    def _keys(self, tenant: str, trace_id: str) -> list[str]:
        return [
            self._info_key(tenant, trace_id),
            self._park_key(tenant, trace_id),
            self._deadlines.key(tenant),
            self._firsts_key(tenant, trace_id),
            self._deadlines.index_key,
            f"{self._prefix}:taken:{tenant}:{trace_id}",
        ]

    @staticmethod
    def _member_prefix(tenant: str, trace_id: str) -> str:
        # '\x1f' cannot appear in tenants or identifiers (contract patterns), so members split unambiguously.
        return f"{tenant}\x1f{trace_id}\x1f"

    def trace_arrived(
        self, tenant: str, trace_id: str, event_id: str, info: JoinInfo
    ) -> list[ParkedFeedback]:
        """Store the trace's join info; return the feedback that was waiting for it (now joined). The trace
        event `event_id` tried again gets the same feedback; another trace event of the trace gets none."""
        return self.parked_from(self.queue_trace(self._client, tenant, trace_id, event_id, info))

    def queue_trace(self, client: Any, tenant: str, trace_id: str, event_id: str, info: JoinInfo) -> Any:
        """Run (or queue on a pipeline) the trace side; parked_from() reads its result."""
        fields: dict[str, object] = {"variant": info.variant, "release": info.release, "intent": info.intent}
        if info.errored:  # only when set: entries written before the field read as not errored
            fields["errored"] = True
        payload = orjson.dumps(fields)
        return self._trace_script(
            keys=self._keys(tenant, trace_id),
            args=[payload, self._join_ttl_s, self._member_prefix(tenant, trace_id), tenant, event_id],
            client=client,
        )

    @staticmethod
    def parked_from(result: list[Any]) -> list[ParkedFeedback]:
        flat, firsts = result
        return [
            ParkedFeedback(flat[i].decode(), json.loads(flat[i + 1]), firsts[i] == 1, firsts[i + 1] == 1)
            for i in range(0, len(flat), 2)
        ]

    def feedback_arrived(
        self, tenant: str, trace_id: str, event_id: str, payload: dict[str, object], now: float | None = None
    ) -> JoinInfo | None:
        """The trace's join info, or None when the feedback was parked to wait for its trace."""
        joined = self.joined_from(self.queue_feedback(self._client, tenant, trace_id, event_id, payload, now))
        return None if joined is None else joined.info

    def queue_feedback(
        self,
        client: Any,
        tenant: str,
        trace_id: str,
        event_id: str,
        payload: dict[str, object],
        now: float | None = None,
    ) -> Any:
        now = time.time() if now is None else now
        return self._feedback_script(
            keys=self._keys(tenant, trace_id),
            args=[
                event_id,
                orjson.dumps(payload),
                self._park_s + self._join_ttl_s,
                now + self._park_s,
                self._member_prefix(tenant, trace_id),
                str(payload["kind"]),
                tenant,
            ],
            client=client,
        )

    @staticmethod
    def joined_from(found: list[Any] | None) -> Joined | None:
        """The result of queue_feedback: the trace's join info and whether the feedback is a first, or
        None when it was parked."""
        if not found:
            return None
        d = json.loads(found[0])
        info = JoinInfo(d["variant"], d.get("release"), d.get("intent"), d.get("errored") is True)
        return Joined(info, found[1] == 1, found[2] == 1)

    def claim_expired(self, now: float | None = None, limit: int = 1000) -> list[tuple[str, ParkedFeedback]]:
        """Feedback whose trace did not arrive in time, as (tenant, parked); each is returned once overall."""
        return list(self.iter_claim_expired(now, limit))

    def iter_claim_expired(
        self, now: float | None = None, limit: int = 1000
    ) -> Iterator[tuple[str, ParkedFeedback]]:
        """As claim_expired, one claim at a time: a caller counts each before the next Redis call,
        so an outage in the middle of a sweep loses none of the feedback already claimed."""
        now = time.time() if now is None else now
        for tenant, member in self._deadlines.claim(now, limit):  # shared between tenants, read only
            _, trace_id, event_id = member.split("\x1f", 2)
            park_key = self._park_key(tenant, trace_id)
            keys = [park_key, self._deadlines.key(tenant), self._deadlines.index_key]
            got = self._claim_script(keys=keys, args=[event_id, member, tenant])
            if got:
                yield tenant, ParkedFeedback(event_id, json.loads(got))
