"""Per-tenant rate limit: a token bucket in Redis, shared by every API replica.

Tokens are events (not requests), refilled continuously at the tenant's rate
up to its burst. Work already done is paid even when refused (`debit`: a body read
and inflated, CPU beyond what a batch paid): the bucket goes into debt, and the
tenant's next requests are refused before they cost anything. The script uses
Redis' own clock so replicas with skewed clocks share one bucket correctly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import redis.asyncio as aioredis

_SCRIPT = """
local key = KEYS[1]
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local debit = tonumber(ARGV[4] or '0')
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local allowed = 0
local wait = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  wait = (cost - tokens) / rate
  if debit == 1 then
    -- work already done (a body inflated) is paid even when refused: the bucket goes into debt
    -- (at most one burst), and the tenant's next requests are refused before costing anything
    tokens = math.max(-burst, tokens - cost)
  end
end
redis.call('HSET', key, 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', key, math.ceil(burst / rate * 1000) + 1000)
return {allowed, tostring(wait)}
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int


class RateLimiter:
    def __init__(self, client: aioredis.Redis, prefix: str = "ragmon:ratelimit") -> None:
        self._client = client
        self._prefix = prefix
        self._script = client.register_script(_SCRIPT)

    async def take(self, tenant: str, events: int, rate: float, burst: int, debit: bool = False) -> Decision:
        """Take `events` tokens if the bucket holds them. With `debit`, a refused take is still paid (the
        bucket goes up to one burst into debt): for work already done, a big body's inflating."""
        allowed, wait = await self._script(
            keys=[f"{self._prefix}:{tenant}"], args=[rate, burst, events, int(debit)]
        )
        wait_s = float(wait)
        return Decision(bool(int(allowed)), max(1, math.ceil(wait_s)) if not int(allowed) else 0)
