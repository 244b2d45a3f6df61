"""Joining feedback to its trace through Redis, whichever arrives first.

Both directions are single Lua scripts, so two worker processes handling a
trace and its feedback at the same moment cannot both miss each other: the
trace side stores its join info and takes every parked feedback atomically;
the feedback side reads the join info or parks itself atomically. Parked
feedback is counted exactly once, by whoever removes it from the park
(a trace arriving, or the sweeper declaring it unjoined).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import redis

_TRACE_ARRIVES = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
local parked = redis.call('HGETALL', KEYS[2])
if #parked > 0 then
  redis.call('DEL', KEYS[2])
  for i = 1, #parked, 2 do
    redis.call('ZREM', KEYS[3], ARGV[3] .. parked[i])
  end
end
return parked
"""

_FEEDBACK_ARRIVES = """
local info = redis.call('GET', KEYS[1])
if info then return info end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5] .. ARGV[1])
return false
"""

_CLAIM_EXPIRED = """
redis.call('ZREM', KEYS[2], ARGV[2])
local payload = redis.call('HGET', KEYS[1], ARGV[1])
if payload then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return payload
end
return false
"""


@dataclass(frozen=True)
class JoinInfo:
    variant: str
    release: str | None
    intent: str | None


@dataclass(frozen=True)
class ParkedFeedback:
    event_id: str
    payload: dict[str, object]


class FeedbackJoin:
    def __init__(
        self, client: redis.Redis, join_ttl_s: int, park_s: int, prefix: str = "ragmon:join"
    ) -> None:
        self._client = client
        self._join_ttl_s = join_ttl_s
        self._park_s = park_s
        self._prefix = prefix
        self._deadlines = f"{prefix}:deadlines"
        self._trace_script = client.register_script(_TRACE_ARRIVES)
        self._feedback_script = client.register_script(_FEEDBACK_ARRIVES)
        self._claim_script = client.register_script(_CLAIM_EXPIRED)

    def _info_key(self, tenant: str, trace_id: str) -> str:
        return f"{self._prefix}:info:{tenant}:{trace_id}"

    def _park_key(self, tenant: str, trace_id: str) -> str:
        return f"{self._prefix}:park:{tenant}:{trace_id}"

    @staticmethod
    def _member_prefix(tenant: str, trace_id: str) -> str:
        # '\x1f' cannot appear in tenants or identifiers (contract patterns), so members split unambiguously.
        return f"{tenant}\x1f{trace_id}\x1f"

    def trace_arrived(self, tenant: str, trace_id: str, info: JoinInfo) -> list[ParkedFeedback]:
        """Store the trace's join info; return the feedback that was waiting for it (now joined)."""
        return self.parked_from(self.queue_trace(self._client, tenant, trace_id, info))

    def queue_trace(self, client: Any, tenant: str, trace_id: str, info: JoinInfo) -> Any:
        """Run (or queue on a pipeline) the trace side; parked_from() reads its result."""
        payload = orjson.dumps({"variant": info.variant, "release": info.release, "intent": info.intent})
        return self._trace_script(
            keys=[self._info_key(tenant, trace_id), self._park_key(tenant, trace_id), self._deadlines],
            args=[payload, self._join_ttl_s, self._member_prefix(tenant, trace_id)],
            client=client,
        )

    @staticmethod
    def parked_from(flat: list[bytes]) -> list[ParkedFeedback]:
        return [ParkedFeedback(flat[i].decode(), json.loads(flat[i + 1])) for i in range(0, len(flat), 2)]

    def feedback_arrived(
        self, tenant: str, trace_id: str, event_id: str, payload: dict[str, object], now: float | None = None
    ) -> JoinInfo | None:
        """The trace's join info, or None when the feedback was parked to wait for its trace."""
        return self.info_from(self.queue_feedback(self._client, tenant, trace_id, event_id, payload, now))

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
            keys=[self._info_key(tenant, trace_id), self._park_key(tenant, trace_id), self._deadlines],
            args=[
                event_id,
                orjson.dumps(payload),
                self._park_s + self._join_ttl_s,
                now + self._park_s,
                self._member_prefix(tenant, trace_id),
            ],
            client=client,
        )

    @staticmethod
    def info_from(found: bytes | None) -> JoinInfo | None:
        if not found:
            return None
        d = json.loads(found)
        return JoinInfo(d["variant"], d.get("release"), d.get("intent"))

    def claim_expired(self, now: float | None = None, limit: int = 1000) -> list[tuple[str, ParkedFeedback]]:
        """Feedback whose trace did not arrive in time, as (tenant, parked); each is returned once overall."""
        return list(self.iter_claim_expired(now, limit))

    def iter_claim_expired(
        self, now: float | None = None, limit: int = 1000
    ) -> Iterator[tuple[str, ParkedFeedback]]:
        """As claim_expired, one claim at a time: a caller counts each before the next Redis call,
        so an outage in the middle of a sweep loses none of the feedback already claimed."""
        now = time.time() if now is None else now
        members = self._client.zrangebyscore(self._deadlines, "-inf", now, start=0, num=limit)
        for raw in members:
            member = raw.decode() if isinstance(raw, bytes) else str(raw)
            tenant, trace_id, event_id = member.split("\x1f", 2)
            park_key = self._park_key(tenant, trace_id)
            got = self._claim_script(keys=[park_key, self._deadlines], args=[event_id, member])
            if got:
                yield tenant, ParkedFeedback(event_id, json.loads(got))
