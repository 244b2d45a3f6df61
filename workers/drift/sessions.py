"""Session state in Redis: each session's last query, feedback marks per trace, and when sessions end.

One hash per (tenant, session) holds the session's last query: its event id, trace
id, timestamp, intent label, whether it was a reformulation, and its embeddings
(field `a:<embedding_model>` for the app's own, `e:<model>` for the pinned
encoder's, float32 bytes). ADVANCE swaps a batch's queries in atomically (one script call
per batch) and returns what each replaced, so of two replicas handling two queries of one session each
consecutive pair is compared exactly once. A query that is already the session's
last (a redelivery) or older than it (late, or a redelivery after newer queries)
changes nothing and is reported as such: counted once, never compared twice.

A session ends when no query came for `idle_s`: its tenant's sorted set holds each session's
deadline (our clock: the receipt of its last query + idle_s; workers/runtime/fairdue.py); the tick
claims the sessions past it, equal shares of the tenants with sessions ended, each once overall
(CLAIM removes it atomically), so one tenant opening sessions by the thousand delays no other
tenant's session outcomes. Feedback marks
(`up`, `down`, `regenerate` -> the feedback's timestamp) live per trace, written
whichever arrives first, and are read when the session of that trace ends.
Every key has a TTL, so a replica that stops ticking leaves nothing behind for ever.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import redis

from workers.runtime.fairdue import REINDEX_LUA, TenantDueSets

# One call per batch: KEYS[1] the idle index (workers/runtime/fairdue.py), KEYS[1 + i] the session hash of
# query i; ARGV[1] the TTL, ARGV[2] the prefix of the tenants' idle sets, then per query: event id, trace id, timestamp, intent, deadline, idle-set member, the number of
# embedding fields, and those fields as name, bytes pairs. Queries run in order, so two queries of one
# session in one batch behave as two calls would. Per query it returns {'duplicate'}, {'late'}, {'ok'}
# (the session's first query) or {'ok', trace id, intent, event id, ts, then name, bytes per embedding}.
_ADVANCE = (
    REINDEX_LUA
    + """
local out = {}
local touched = {}
local a = 3
for k = 2, #KEYS do
  local key = KEYS[k]
  local eid, ts, nvec = ARGV[a], ARGV[a + 2], tonumber(ARGV[a + 6])
  local last = redis.call('HMGET', key, 'eid', 'ts')
  if last[1] == eid then
    out[#out + 1] = {'duplicate'}
  elseif last[2] and tonumber(last[2]) > tonumber(ts) then
    out[#out + 1] = {'late'}
  else
    local prev = {'ok'}
    if last[1] then
      local all = redis.call('HGETALL', key)
      local vec = {}
      for i = 1, #all, 2 do
        local name = all[i]
        if name == 'tid' or name == 'intent' then
          prev[name == 'tid' and 2 or 3] = all[i + 1]
        elseif name ~= 'eid' and name ~= 'ts' and name ~= 'rf' then
          vec[#vec + 1] = name
          vec[#vec + 1] = all[i + 1]
        end
      end
      prev[4] = last[1]
      prev[5] = last[2]
      for i = 1, #vec do prev[5 + i] = vec[i] end
    end
    redis.call('DEL', key)
    local fields = {'eid', eid, 'tid', ARGV[a + 1], 'ts', ts, 'intent', ARGV[a + 3], 'rf', '0'}
    for i = a + 7, a + 6 + 2 * nvec do fields[#fields + 1] = ARGV[i] end
    redis.call('HSET', key, unpack(fields))
    redis.call('EXPIRE', key, ARGV[1])
    local tenant = string.match(ARGV[a + 5], '^([^\\31]*)')
    redis.call('ZADD', ARGV[2] .. tenant, ARGV[a + 4], ARGV[a + 5])
    touched[tenant] = true
    out[#out + 1] = prev
  end
  a = a + 7 + 2 * nvec
end
for tenant in pairs(touched) do reindex(ARGV[2] .. tenant, KEYS[1], tenant) end
return out
"""
)

# Mark each session's last query as a reformulation, unless a newer query replaced it meanwhile:
# KEYS[i] a session hash, ARGV[i] the event id that must still be its last.
_MARK = """
local n = 0
for i = 1, #KEYS do
  if redis.call('HGET', KEYS[i], 'eid') == ARGV[i] then
    redis.call('HSET', KEYS[i], 'rf', '1')
    n = n + 1
  end
end
return n
"""

# KEYS: the tenant's idle set, the session hash, the idle index. ARGV: member, now, tenant.
_CLAIM = (
    REINDEX_LUA
    + """
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not deadline or tonumber(deadline) > tonumber(ARGV[2]) then return false end
redis.call('ZREM', KEYS[1], ARGV[1])
reindex(KEYS[1], KEYS[3], ARGV[3])
local s = redis.call('HMGET', KEYS[2], 'tid', 'intent', 'rf')
redis.call('DEL', KEYS[2])
if not s[1] then return false end
return s
"""
)

APP_FIELD = "a:"
ENCODER_FIELD = "e:"


@dataclass(frozen=True)
class Query:
    """One query of a session, as ADVANCE stores it."""

    event_id: str
    trace_id: str
    at: float  # the trace's own timestamp (the app's clock): follow-up windows are the user's time
    intent: str  # already a label of the closed set
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  # field name -> unit-less float32 vector


@dataclass(frozen=True)
class Advanced:
    status: str  # ok | duplicate | late
    previous: Query | None = None  # ok only: the query it replaced (None: the session's first)


@dataclass(frozen=True)
class Ended:
    tenant: str
    trace_id: str  # the session's last query
    intent: str
    reformulated: bool  # the last query was itself a reformulation of the one before


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class SessionStore:
    def __init__(self, client: redis.Redis, prefix: str, idle_s: float, window_s: float) -> None:
        self._client = client
        self._prefix = f"{prefix}:session"
        # each tenant's sessions by deadline; an older version kept every tenant's in one set
        self._idle = TenantDueSets.replacing(client, self._prefix, "idle", separator="\x1f")
        self.idle_s = idle_s
        # A session hash outlives its deadline by idle_s (the tick may be late); feedback marks must last
        # until the session of their trace ends: at most idle_s after its last query, plus the same slack.
        self.ttl_s = int(2 * idle_s + window_s) + 60
        self._advance = client.register_script(_ADVANCE)
        self._mark = client.register_script(_MARK)
        self._claim = client.register_script(_CLAIM)

    def _session_key(self, tenant: str, session_id: str) -> str:
        return f"{self._prefix}:s:{tenant}:{session_id}"

    def _feedback_key(self, tenant: str, trace_id: str) -> str:
        return f"{self._prefix}:fb:{tenant}:{trace_id}"

    @staticmethod
    def _member(tenant: str, session_id: str) -> str:
        # '\x1f' cannot appear in tenants or identifiers (contract patterns), so members split unambiguously.
        return f"{tenant}\x1f{session_id}"

    def advance(self, queries: list[tuple[str, str, Query, float]]) -> list[Advanced]:
        """Swap each (tenant, session id, query, received_at) in, in order, in one script call; what
        each replaced, or why it changed nothing."""
        if not queries:
            return []
        keys = [self._idle.index_key]
        args: list[Any] = [self.ttl_s, self._idle.set_prefix]
        for tenant, session_id, q, received_at in queries:
            keys.append(self._session_key(tenant, session_id))
            member = self._member(tenant, session_id)
            args += [q.event_id, q.trace_id, repr(q.at), q.intent, repr(received_at + self.idle_s), member]
            args.append(len(q.vectors))
            for name, vector in q.vectors.items():
                args += [name, np.asarray(vector, dtype=np.float32).tobytes()]
        return [self.advanced_from(r) for r in self._advance(keys=keys, args=args)]

    @staticmethod
    def advanced_from(result: list[Any]) -> Advanced:
        status = _text(result[0])
        if status != "ok":
            return Advanced(status)
        if len(result) == 1:
            return Advanced("ok", None)
        trace_id, intent, event_id, ts = result[1:5]
        vectors = {
            _text(result[i]): np.frombuffer(result[i + 1], dtype=np.float32) for i in range(5, len(result), 2)
        }
        return Advanced("ok", Query(_text(event_id), _text(trace_id), float(ts), _text(intent), vectors))

    def queue_mark_reformulations(self, pipe: Any, marks: list[tuple[str, str, str]]) -> None:
        """(tenant, session id, event id) each: one script call for the batch."""
        if marks:
            keys = [self._session_key(tenant, session_id) for tenant, session_id, _ in marks]
            self._mark(keys=keys, args=[event_id for _, _, event_id in marks], client=pipe)

    def queue_feedback(self, pipe: Any, tenant: str, trace_id: str, mark: str, at: float) -> None:
        """mark: up, down or regenerate; the same event again writes the same value (idempotent)."""
        key = self._feedback_key(tenant, trace_id)
        pipe.hset(key, mark, repr(at))
        pipe.expire(key, self.ttl_s)

    def feedback_of(self, tenant: str, trace_id: str) -> dict[str, float]:
        raw = self._client.hgetall(self._feedback_key(tenant, trace_id))
        return {_text(k): float(v) for k, v in raw.items()}

    def iter_ended(self, now: float, limit: int) -> Iterator[Ended]:
        """Sessions idle past their deadline, each claimed (and yielded) once over all replicas; a sweep
        takes equal shares of the tenants with sessions ended (workers/runtime/fairdue.py)."""
        for tenant, member in self._idle.claim(now, limit):
            session_id = member.split("\x1f", 1)[1]
            keys = [self._idle.key(tenant), self._session_key(tenant, session_id), self._idle.index_key]
            got = self._claim(keys=keys, args=[member, now, tenant])
            if got:
                trace_id, intent, rf = (_text(v) for v in got)
                yield Ended(tenant, trace_id, intent, rf == "1")
