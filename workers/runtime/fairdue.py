"""Due sets shared between tenants: what one tenant schedules never waits behind another tenant's backlog.

Several workers keep members to look at later, each scored by when it is due: the assembler's open
traces, the drift worker's sessions until they end, the metrics worker's parked feedback until its wait
ends, the Phoenix exporter's scores until their spans are there. One sorted set for every tenant is a
FIFO across tenants: a tenant that schedules members faster than the worker handles them puts its
backlog ahead of everyone's. Here each tenant's members are in a set of their own, `<set prefix><tenant>`,
and an index (`<index>`) holds each tenant that has members, scored by its earliest. A claim splits its
limit in equal shares between the tenants with members due (earliest first), in passes, what one
tenant leaves going to those with more: while two tenants both have members due, one with thousands
takes no more than one with a few.

A worker's own scripts that add or remove members prepend `REINDEX_LUA` and call
`reindex(set, index, tenant)` after changing a tenant's set, so the index stays exact (no tenant
without members, each at its earliest score). The tenants' sets are named from the index inside the
claim script: one Redis, as for the rest of the workers' state. Tenant names have no separator in them
(a slug), so a member's tenant is its text before the first separator.

A set an older version kept for every tenant (`legacy_key`) is moved into the tenants' sets at the first
claim (a member in both keeps its earlier score).
"""

from __future__ import annotations

import redis

REINDEX_LUA = """
local function reindex(set, index, tenant)
  local first = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if first[2] then redis.call('ZADD', index, first[2], tenant) else redis.call('ZREM', index, tenant) end
end
"""

# KEYS: the index. ARGV: now, lease seconds ('' = leave the members where they are), limit, set prefix.
# Returns tenant, member pairs flattened. With a lease a claimed member is pushed out by it (another
# replica skips it; if this one dies it is due again when the lease ends); without, the caller's own
# script removes what it takes, and a pass reads past what the earlier passes returned.
_CLAIM = (
    REINDEX_LUA
    + """
local now, lease, left = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local active = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
local out, taken = {}, {}
while left > 0 and #active > 0 do
  local share = math.max(1, math.floor(left / #active))
  local more = {}
  for _, tenant in ipairs(active) do
    if left <= 0 then break end
    local set = ARGV[4] .. tenant
    local take = math.min(share, left)
    local skip = 0
    if lease == '' then skip = taken[tenant] or 0 end
    local due = redis.call('ZRANGEBYSCORE', set, '-inf', now, 'LIMIT', skip, take)
    for _, member in ipairs(due) do
      if lease ~= '' then redis.call('ZADD', set, now + tonumber(lease), member) end
      out[#out + 1] = tenant
      out[#out + 1] = member
    end
    taken[tenant] = skip + #due
    left = left - #due
    if #due == take then more[#more + 1] = tenant end
    if lease ~= '' then reindex(set, KEYS[1], tenant) end
  end
  active = more
end
return out
"""
)

# KEYS: the tenant's set, the index. ARGV: member, its score ('' removes it), tenant.
_SET = (
    REINDEX_LUA
    + """
if ARGV[2] == '' then redis.call('ZREM', KEYS[1], ARGV[1]) else redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1]) end
reindex(KEYS[1], KEYS[2], ARGV[3])
"""
)

# KEYS: the index. ARGV: the set prefix. Members of every tenant.
_SIZE = """
local n = 0
for _, tenant in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do n = n + redis.call('ZCARD', ARGV[1] .. tenant) end
return n
"""

# KEYS: the older version's set, the index. ARGV: the set prefix, how many to move, the separator.
# Returns how many are left.
_MIGRATE = (
    REINDEX_LUA
    + """
local moved = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
local touched = {}
for i = 1, #moved, 2 do
  local member = moved[i]
  local cut = string.find(member, ARGV[3], 1, true)
  local tenant = cut and string.sub(member, 1, cut - 1) or member
  redis.call('ZADD', ARGV[1] .. tenant, 'LT', moved[i + 1], member)  -- added, or kept at the earlier
  redis.call('ZREM', KEYS[1], member)
  touched[tenant] = true
end
for tenant in pairs(touched) do reindex(ARGV[1] .. tenant, KEYS[2], tenant) end
return redis.call('ZCARD', KEYS[1])
"""
)


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


class TenantDueSets:
    def __init__(
        self,
        client: redis.Redis,
        index_key: str,
        set_prefix: str,
        *,
        legacy_key: str | None = None,
        separator: str = "/",
    ) -> None:
        self.index_key, self.set_prefix = index_key, set_prefix
        self._legacy_key, self._separator = legacy_key, separator
        self._claim = client.register_script(_CLAIM)
        self._set = client.register_script(_SET)
        self._size = client.register_script(_SIZE)
        self._migrate = client.register_script(_MIGRATE)

    @classmethod
    def replacing(cls, client: redis.Redis, prefix: str, name: str, *, separator: str = "/") -> TenantDueSets:
        """The sets that replace an older version's one set `<prefix>:<name>`: each tenant's is
        `<prefix>:<name>:<tenant>`, the index `<prefix>:due`, and the old set is moved at the first claim."""
        return cls(
            client, f"{prefix}:due", f"{prefix}:{name}:", legacy_key=f"{prefix}:{name}", separator=separator
        )

    def key(self, tenant: str) -> str:
        """The tenant's set: a worker's own scripts that change it reindex with `index_key` after."""
        return self.set_prefix + tenant

    def claim(self, now: float, limit: int, lease_s: float | None = None) -> list[tuple[str, str]]:
        """Up to `limit` due (tenant, member), shared between the tenants with members due.

        With `lease_s` each is pushed out by the lease; without, the caller's script removes what it
        takes (and a member two replicas both read is taken by one of them)."""
        if self._legacy_key is not None:
            legacy = [self._legacy_key, self.index_key]
            while int(self._migrate(keys=legacy, args=[self.set_prefix, 1000, self._separator])):
                pass
            self._legacy_key = None
        flat = self._claim(
            keys=[self.index_key], args=[now, "" if lease_s is None else lease_s, limit, self.set_prefix]
        )
        return [(_text(flat[i]), _text(flat[i + 1])) for i in range(0, len(flat), 2)]

    def set(self, tenant: str, member: str, score: float) -> None:
        self._set(keys=[self.key(tenant), self.index_key], args=[member, score, tenant])

    def remove(self, tenant: str, member: str) -> None:
        self._set(keys=[self.key(tenant), self.index_key], args=[member, "", tenant])

    def size(self) -> int:
        """Members of every tenant."""
        return int(self._size(keys=[self.index_key], args=[self.set_prefix]))
