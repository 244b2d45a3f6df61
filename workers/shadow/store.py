"""Shadow state in Redis: requests waiting for their twin, pairs, counts, leases.

Keys (prefix P, all of one tenant under the hash tag {tenant}):
  P:{t}:req:<request_id>  HASH  trace:<variant>, faith:<variant>, excl:<variant> -> JSON outcomes;
                                TTL pair_wait_s until paired, then keep_s
  P:{t}:pairs:<candidate> ZSET  request ids paired with production, by pairing time (the window)
  P:{t}:seen              HASH  variant -> traces recorded (first delivery of a request's trace only)
  P:{t}:paired / pending  HASH  candidate -> pairs formed / formed since the last recompute
  P:{t}:active            STRING set while a candidate runs (TTL active_s)
  P:{t}:prodlat:before|during  LIST  production total latency without / while a candidate runs
  P:{t}:meta:<candidate>  HASH  last_recompute
  P:{t}:lease:<candidate> STRING the replica recomputing now (SET NX PX)
  P:candidates            SET   "tenant<TAB>candidate"

One Lua script applies a batch of events, each atomically: HSETNX of its
field makes a redelivery a no-op (nothing counted twice), and the counts and
pairing happen in the same atomic step, so a kill -9 between them is
impossible (nothing lost: the offset is committed only after the script ran).
Pairing is symmetric: whichever twin arrives second finds the first.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import redis

from workers.shadow.config import ShadowConfig

PRODUCTION = "production"
_SCRIPT_BATCH = 500  # events per script call: one call blocks Redis for about a millisecond

# One call applies a batch: a header, then 7 values per event. Keys are built
# here from the tenant (single Redis; on a cluster all of one tenant share the
# hash tag {tenant}, but a batch may span tenants).
_RECORD = """
local root, wait_ms, keep_ms, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local lat_cap, active_ms, max_cand = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local function one(tenant, rid, field, value, variant, is_trace, latency)
  local p = root .. ':{' .. tenant .. '}:'
  local req = p .. 'req:' .. rid
  if variant ~= 'production' and redis.call('SISMEMBER', root .. ':candidates', tenant .. '\t' .. variant) == 0 then
    if redis.call('HLEN', p .. 'paired') >= max_cand and redis.call('HEXISTS', p .. 'paired', variant) == 0 then
      return -1
    end
    redis.call('HSETNX', p .. 'paired', variant, 0)
    redis.call('SADD', root .. ':candidates', tenant .. '\t' .. variant)
  end
  if redis.call('HSETNX', req, field, value) == 0 then return 0 end
  if redis.call('PTTL', req) < 0 then redis.call('PEXPIRE', req, wait_ms) end
  if is_trace == '1' then
    redis.call('HINCRBY', p .. 'seen', variant, 1)
    if variant == 'production' then
      if latency ~= '' then
        local which = 'before'
        if redis.call('EXISTS', p .. 'active') == 1 then which = 'during' end
        redis.call('LPUSH', p .. 'prodlat:' .. which, latency)
        redis.call('LTRIM', p .. 'prodlat:' .. which, 0, lat_cap - 1)
      end
    else
      redis.call('SET', p .. 'active', variant, 'PX', active_ms)
    end
  end
  if redis.call('HEXISTS', req, 'trace:production') == 0 then return 1 end
  local formed = 0
  for _, f in ipairs(redis.call('HKEYS', req)) do
    if string.sub(f, 1, 6) == 'trace:' and f ~= 'trace:production' then
      local cand = string.sub(f, 7)
      if redis.call('ZADD', p .. 'pairs:' .. cand, 'NX', now, rid) == 1 then
        redis.call('HINCRBY', p .. 'paired', cand, 1)
        redis.call('HINCRBY', p .. 'pending', cand, 1)
        redis.call('PEXPIRE', req, keep_ms)
        formed = formed + 1
      end
    end
  end
  return 1 + formed
end
local out = {}
for i = 8, #ARGV, 7 do
  out[#out + 1] = one(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6])
end
return out
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True)
class Item:
    """One event's contribution: a field of the request's hash."""

    tenant: str
    request_id: str
    field: str
    value: bytes
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


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


class ShadowStore:
    def __init__(self, client: redis.Redis, config: ShadowConfig) -> None:
        self.redis = client
        self.config = config
        self.root = config.key_prefix
        self._record = client.register_script(_RECORD)
        self._release = client.register_script(_RELEASE)

    def prefix(self, tenant: str) -> str:
        return f"{self.root}:{{{tenant}}}:"

    def record_many(self, items: list[Item], now: float) -> list[Recorded]:
        """Apply a batch of events in order (twins of a request share a partition, so their order is
        kept), one atomic script call per 500 events."""
        c = self.config
        header: list[Any] = [self.root, int(c.pair_wait_s * 1000), int(c.keep_s * 1000), now, c.latency_samples,
                             int(c.active_s * 1000), c.max_candidates_per_tenant]
        replies: list[int] = []
        for start in range(0, len(items), _SCRIPT_BATCH):
            args = list(header)
            for it in items[start:start + _SCRIPT_BATCH]:
                args += [it.tenant, it.request_id, it.field, it.value, it.variant, "1" if it.is_trace else "0",
                         "" if it.latency_s is None else repr(it.latency_s)]
            replies += [int(r) for r in self._record(keys=[], args=args)]
        return [Recorded(False, 0, refused=True) if r < 0 else Recorded(r > 0, max(0, r - 1)) for r in replies]

    def candidates(self) -> list[tuple[str, str]]:
        members = self.redis.smembers(f"{self.root}:candidates")
        return sorted(tuple(_text(m).split("\t", 1)) for m in members)  # type: ignore[misc]

    def counts(self, tenant: str) -> Counts:
        p = self.prefix(tenant)
        pipe = self.redis.pipeline(transaction=False)
        for part in ("seen", "paired", "pending"):
            pipe.hgetall(p + part)
        seen, paired, pending = ({_text(k): int(v) for k, v in h.items()} for h in pipe.execute())
        return Counts(seen, paired, pending)

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
