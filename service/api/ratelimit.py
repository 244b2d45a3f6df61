"""Per-tenant rate limit: a token bucket in Redis, shared by every API replica.

Tokens are events (not requests), refilled continuously at the tenant's rate
up to its burst. The script uses Redis' own clock so replicas with skewed
clocks share one bucket correctly.
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

    async def take(self, tenant: str, events: int, rate: float, burst: int) -> Decision:
        allowed, wait = await self._script(keys=[f"{self._prefix}:{tenant}"], args=[rate, burst, events])
        wait_s = float(wait)
        return Decision(bool(int(allowed)), max(1, math.ceil(wait_s)) if not int(allowed) else 0)
