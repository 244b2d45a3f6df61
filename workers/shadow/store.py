"""Shadow state in Redis: requests waiting for their twin, pairs, counts, leases.

Keys (prefix P = key_prefix; every key of a tenant carries the hash tag {tenant}, so all of one tenant's
state is in one Redis Cluster hash slot):
  P:{t}:req:<request_id>  HASH  trace:<variant>, faith:<variant>, excl:<variant> -> JSON outcomes, seq (the
                                production trace's number among the tenant's);
                                TTL pair_wait_s until paired, then keep_s
  P:{t}:pairs:<candidate> ZSET  request ids paired with production, by pairing time (the window)
  P:{t}:seen              HASH  variant -> traces recorded (first delivery of a request's trace only)
  P:{t}:paired            HASH  candidate -> pairs formed (a field per candidate: the tenant's candidates)
  P:{t}:pending           HASH  candidate -> pairs formed since the last recompute
  P:{t}:base              HASH  candidate -> production traces recorded before its first event (coverage)
  P:{t}:early             HASH  candidate -> pairs whose production trace was recorded before that (coverage)
  P:{t}:last              ZSET  candidate -> time of its last event (the candidate window: one not seen for
                                candidate_window_s leaves, its state with it, expire_candidates())
  P:{t}:active            STRING set while a candidate runs (TTL active_s)
  P:{t}:prodlat:before|during  LIST  production total latency without / while a candidate runs
  P:{t}:meta:<candidate>  HASH  last_recompute
  P:{t}:lease:<candidate> STRING the replica recomputing now (SET NX PX)
  P:{t}:result:<candidate> STRING the last recompute's comparison (JSON)
  P:tenants               SET   tenants with shadow state (the one key outside a tenant's slot; never
                                touched by a script)

One Lua script call applies a chunk of one tenant's events (at most 500), in
order: HSETNX of its field makes a redelivery a no-op (nothing counted twice),
and the counts and pairing happen in the same call, which Redis runs
atomically, so a kill -9 cannot leave a counted trace without its pair or the
reverse (nothing lost: the offset is committed only after the call ran).
Pairing is symmetric: whichever twin arrives second finds the first. Every key
a call touches is of one tenant, hence of one hash slot: the call declares the
tenant's counters and the requests' hashes as KEYS and derives the only other
ones, P:{t}:pairs:<candidate>, from the same prefix (Redis Cluster routes the
call by its keys and refuses a cross-slot one). A batch of several tenants is
one call per tenant and chunk, sent in one pipelined round trip with the SADD
of P:tenants. The events travel as one msgpack argument (cmsgpack in the
script): encoding thousands of arguments cost more than the script itself.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec
import redis
from redis.exceptions import NoScriptError

from workers.shadow.config import ShadowConfig

PRODUCTION = "production"
_SCRIPT_BATCH = 500  # events per script call: one call blocks Redis for about a millisecond
_COUNTERS = (
    "seen",
    "paired",
    "pending",
    "active",
    "prodlat:before",
    "prodlat:during",
    "base",
    "early",
    "last",
)

# KEYS: the tenant's 9 counters (_COUNTERS), then one request hash per event. ARGV: the tenant prefix,
# wait_ms, keep_ms, now, latency cap, active_ms, max candidates, then the events as msgpack:
# [[request_id, field, value, variant, is_trace, latency_s or nil], ...]. Replies one byte per event,
# 49 + r, r: -1 refused (too many candidates), 0 already recorded, 1 + pairs formed (one string: an array
# of 500 numbers took longer to parse than to compute).
_RECORD = """#!lua
local seen_k, paired_k, pending_k, active_k, before_k, during_k = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local base_k, early_k, last_k = KEYS[7], KEYS[8], KEYS[9]
local p, wait_ms, keep_ms, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local lat_cap, active_ms, max_cand = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local items = cmsgpack.unpack(ARGV[8])
local active = redis.call('EXISTS', active_k) == 1
local prod0 = tonumber(redis.call('HGET', seen_k, 'production') or '0')
local known, seen, paired, early, bases = {}, {}, {}, {}, {}
local before, during = {}, {}
local running = nil
local out = {}
local function pair(req, rid, cand, production_was_first)
  if redis.call('ZADD', p .. 'pairs:' .. cand, 'NX', now, rid) == 1 then
    paired[cand] = (paired[cand] or 0) + 1
    redis.call('PEXPIRE', req, keep_ms)
    if production_was_first then  -- was that production trace recorded before the candidate's first event?
      if bases[cand] == nil then bases[cand] = tonumber(redis.call('HGET', base_k, cand) or '0') end
      if tonumber(redis.call('HGET', req, 'seq') or '0') <= bases[cand] then early[cand] = (early[cand] or 0) + 1 end
    end
    return 1
  end
  return 0
end
for i, it in ipairs(items) do
  local rid, field, value, variant, is_trace, latency = it[1], it[2], it[3], it[4], it[5], it[6]
  local req = KEYS[9 + i]
  local r = nil
  if variant ~= 'production' and not known[variant] then
    if redis.call('HEXISTS', paired_k, variant) == 0 then
      if redis.call('HLEN', paired_k) >= max_cand then
        r = -1
      else  -- a new candidate: its coverage counts the production traces from now on
        redis.call('HSET', paired_k, variant, 0)
        bases[variant] = prod0 + (seen['production'] or 0)
        redis.call('HSET', base_k, variant, bases[variant])
      end
    end
    if r == nil then known[variant] = true end
  end
  if r == nil then
    if redis.call('HSETNX', req, field, value) == 0 then
      r = 0
    else
      local fields = redis.call('HLEN', req)
      if fields == 1 then redis.call('PEXPIRE', req, wait_ms) end  -- created now: it waits for its twin
      local formed = 0
      if is_trace then
        seen[variant] = (seen[variant] or 0) + 1
        if variant == 'production' then
          redis.call('HSET', req, 'seq', prod0 + seen[variant])  -- its place among the production traces
          if latency then
            if active then during[#during + 1] = latency else before[#before + 1] = latency end
          end
        else
          running = variant
          active = true
        end
        if fields > 1 then
          if variant == 'production' then
            for _, f in ipairs(redis.call('HKEYS', req)) do
              if string.sub(f, 1, 6) == 'trace:' and f ~= 'trace:production' then
                formed = formed + pair(req, rid, string.sub(f, 7), false)
              end
            end
          elseif redis.call('HEXISTS', req, 'trace:production') == 1 then
            formed = pair(req, rid, variant, true)
          end
        end
      end
      r = 1 + formed
    end
  end
  out[i] = string.char(49 + r)
end
for variant, n in pairs(seen) do redis.call('HINCRBY', seen_k, variant, n) end
for cand, n in pairs(early) do redis.call('HINCRBY', early_k, cand, n) end
for cand, _ in pairs(known) do redis.call('ZADD', last_k, now, cand) end  -- seen now: its window starts again
for cand, n in pairs(paired) do
  redis.call('HINCRBY', paired_k, cand, n)
  redis.call('HINCRBY', pending_k, cand, n)
end
if running then redis.call('SET', active_k, running, 'PX', active_ms) end
for _, l in ipairs({{before_k, before}, {during_k, during}}) do
  if #l[2] > 0 then
    redis.call('LPUSH', l[1], unpack(l[2]))
    redis.call('LTRIM', l[1], 0, lat_cap - 1)
  end
end
return table.concat(out)
"""

# KEYS: the tenant's seen, paired, pending, base, early, last. ARGV: the tenant prefix, now, oldest (a
# candidate whose last event is older leaves). A candidate without a last time (state written before the
# window existed) starts its window now. Replies the candidates that left.
_EXPIRE = """#!lua
local p, now, oldest = ARGV[1], ARGV[2], ARGV[3]
for _, c in ipairs(redis.call('HKEYS', KEYS[2])) do
  if not redis.call('ZSCORE', KEYS[6], c) then redis.call('ZADD', KEYS[6], now, c) end
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', '(' .. oldest)
for _, c in ipairs(gone) do
  for i = 1, 5 do redis.call('HDEL', KEYS[i], c) end
  redis.call('ZREM', KEYS[6], c)
  redis.call('DEL', p .. 'pairs:' .. c, p .. 'meta:' .. c, p .. 'result:' .. c)
end
return gone
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class Item(NamedTuple):
    """One event's contribution: a field of the request's hash."""

    tenant: str
    request_id: str
    field: str
    value: str  # the outcome's JSON
    variant: str
    is_trace: bool
    latency_s: float | None = None


@dataclass(frozen=True)
class Recorded:
    """What one event did: new (first delivery), pairs formed, or refused (too many candidates)."""

    new: bool
    formed: int
    refused: bool = False


@dataclass(frozen=True)
class Counts:
    seen: dict[str, int]
    paired: dict[str, int]
    pending: dict[str, int]
    base: dict[str, int]  # candidate -> production traces recorded before its first event
    early: dict[str, int]  # candidate -> pairs whose production trace is one of those


_PACK = msgspec.msgpack.Encoder().encode
_REFUSED, _NEW, _DUPLICATE = Recorded(False, 0, refused=True), Recorded(True, 0), Recorded(False, 0)


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


class ShadowStore:
    def __init__(self, client: redis.Redis, config: ShadowConfig) -> None:
        self.redis = client
        self.config = config
        self.root = config.key_prefix
        self._record_sha = hashlib.sha1(_RECORD.encode()).hexdigest()  # loaded on first use (NoScriptError)
        self._release = client.register_script(_RELEASE)
        self._expire = client.register_script(_EXPIRE)

    def prefix(self, tenant: str) -> str:
        return f"{self.root}:{{{tenant}}}:"

    def record_many(self, items: list[Item], now: float) -> list[Recorded]:
        """Apply a batch of events: one script call per tenant and chunk of 500, in the batch's order within a
        tenant (twins of a request share a partition, so their order is kept), all in one round trip."""
        c = self.config
        header = [
            int(c.pair_wait_s * 1000),
            int(c.keep_s * 1000),
            now,
            c.latency_samples,
            int(c.active_s * 1000),
            c.max_candidates_per_tenant,
        ]
        by_tenant: dict[str, list[int]] = {}
        for i, it in enumerate(items):
            by_tenant.setdefault(it.tenant, []).append(i)
        calls: list[tuple[list[int], list[Any]]] = []
        for tenant, indices in by_tenant.items():
            p = self.prefix(tenant)
            counters = [p + name for name in _COUNTERS]
            for start in range(0, len(indices), _SCRIPT_BATCH):
                chunk = indices[start : start + _SCRIPT_BATCH]
                keys = counters + [f"{p}req:{items[i].request_id}" for i in chunk]
                blob = _PACK([items[i][1:] for i in chunk])
                calls.append((chunk, [len(keys), *keys, p, *header, blob]))
        replies = self._run(list(by_tenant), [args for _, args in calls])
        out: list[Recorded] = [Recorded(False, 0)] * len(items)
        for (chunk, _), reply in zip(calls, replies, strict=True):
            for i, code in zip(chunk, reply.encode() if isinstance(reply, str) else reply, strict=True):
                r = code - 49
                out[i] = (
                    _REFUSED if r < 0 else _NEW if r == 1 else _DUPLICATE if r == 0 else Recorded(True, r - 1)
                )
        return out

    def _run(self, tenants: list[str], calls: list[list[Any]]) -> list[bytes | str]:
        if not calls:
            return []
        for attempt in range(2):
            pipe = self.redis.pipeline(transaction=False)
            pipe.sadd(f"{self.root}:tenants", *tenants)  # before the state: every tenant with state is listed
            for args in calls:
                pipe.evalsha(self._record_sha, *args)
            try:
                return pipe.execute()[1:]
            except NoScriptError:  # a restarted or flushed Redis: load it and apply again (idempotent)
                if attempt:
                    raise
                self._record_sha = self.redis.script_load(_RECORD)
        raise AssertionError("unreachable")

    def candidates(self) -> list[tuple[str, str]]:
        """(tenant, candidate) of every tenant with shadow state."""
        tenants = sorted(_text(t) for t in self.redis.smembers(f"{self.root}:tenants"))
        pipe = self.redis.pipeline(transaction=False)
        for tenant in tenants:
            pipe.hkeys(self.prefix(tenant) + "paired")
        return sorted(
            (tenant, _text(c)) for tenant, cands in zip(tenants, pipe.execute(), strict=True) for c in cands
        )

    def expire_candidates(self, now: float) -> list[tuple[str, str]]:
        """Forget the candidates with no event for candidate_window_s, with their pairs, counts and last
        comparison (one atomic call per tenant): a candidate's name leaves, so a new one may take its place
        under max_candidates_per_tenant. Returns the (tenant, candidate) that left."""
        tenants = sorted(_text(t) for t in self.redis.smembers(f"{self.root}:tenants"))
        oldest = now - self.config.candidate_window_s
        gone: list[tuple[str, str]] = []
        for tenant in tenants:
            p = self.prefix(tenant)
            keys = [p + name for name in ("seen", "paired", "pending", "base", "early", "last")]
            gone += [(tenant, _text(c)) for c in self._expire(keys=keys, args=[p, now, oldest])]
        return gone

    def counts(self, tenant: str) -> Counts:
        p = self.prefix(tenant)
        pipe = self.redis.pipeline(transaction=False)
        for part in ("seen", "paired", "pending", "base", "early"):
            pipe.hgetall(p + part)
        seen, paired, pending, base, early = (
            {_text(k): int(v) for k, v in h.items()} for h in pipe.execute()
        )
        return Counts(seen, paired, pending, base, early)

    def window(self, tenant: str, candidate: str) -> list[tuple[str, dict[str, bytes]]]:
        """The most recent window_pairs pairs (oldest first) with their request hashes; trims the window
        and drops pairs whose request expired."""
        p = self.prefix(tenant)
        key = f"{p}pairs:{candidate}"
        self.redis.zremrangebyrank(key, 0, -(self.config.window_pairs + 1))
        ids = [_text(r) for r in self.redis.zrange(key, 0, -1)]
        pipe = self.redis.pipeline(transaction=False)
        for rid in ids:
            pipe.hgetall(f"{p}req:{rid}")
        rows, gone = [], []
        for rid, h in zip(ids, pipe.execute(), strict=True):
            if h:
                rows.append((rid, {_text(k): v for k, v in h.items()}))
            else:
                gone.append(rid)
        if gone:
            self.redis.zrem(key, *gone)
        return rows

    def production_latencies(self, tenant: str) -> tuple[list[float], list[float]]:
        p = self.prefix(tenant)
        pipe = self.redis.pipeline(transaction=False)
        pipe.lrange(p + "prodlat:before", 0, -1)
        pipe.lrange(p + "prodlat:during", 0, -1)
        before, during = pipe.execute()
        return [float(x) for x in before], [float(x) for x in during]

    def last_recompute(self, tenant: str, candidate: str) -> float:
        v = self.redis.hget(f"{self.prefix(tenant)}meta:{candidate}", "last_recompute")
        return float(v) if v is not None else 0.0

    def mark_recomputed(self, tenant: str, candidate: str, now: float, consumed: int) -> None:
        p = self.prefix(tenant)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(f"{p}meta:{candidate}", "last_recompute", now)
        pipe.hincrby(p + "pending", candidate, -consumed)
        pipe.execute()

    def acquire_lease(self, tenant: str, candidate: str) -> str | None:
        token = uuid.uuid4().hex
        key = f"{self.prefix(tenant)}lease:{candidate}"
        ok = self.redis.set(key, token, nx=True, px=max(1, int(self.config.lease_s * 1000)))
        return token if ok else None

    def release_lease(self, tenant: str, candidate: str, token: str) -> None:
        self._release(keys=[f"{self.prefix(tenant)}lease:{candidate}"], args=[token])
