"""Releases as metric labels, decided the same way by every replica through Redis.

Two pieces of state, both bounded:

- RecentReleases: which release names may be a label value of a tenant.
  A release is kept while traces or markers keep naming it (last seen within
  `window_s`), at most `limit` per tenant; a release seen while the tenant
  already has `limit` recent ones is labelled `other` until one of them ages
  out. The set is a Redis sorted set per tenant (release -> last seen), so
  replicas agree, and a long-running worker keeps labelling new releases
  after old ones stopped appearing. A release marker is authoritative: it is
  always admitted, displacing the least recently seen release.
- CurrentReleases: the newest marker per (tenant, variant), the source of
  `ragmon_release_info`. Markers' variants are client-chosen, so each tenant
  keeps `production` and its `max_variants` most recently announced other
  variants (the cap traces' variants have too); older entries are deleted
  from the hash.

Each process caches a decision for `refresh_s`, so the hot path costs one
dict lookup per trace and Redis sees one call per release and process per
refresh interval. A release displaced by a marker may keep its label on
another replica for up to `refresh_s`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import redis

from workers.runtime.labels import OTHER

RECENT_KEY = "ragmon:releases:recent:"  # + tenant: ZSET release -> last seen (unix seconds)
CURRENT_KEY = "ragmon:releases"  # HASH "tenant\x1fvariant" -> {"release", "ts"}
ALWAYS_KEPT_VARIANT = "production"

# KEYS[1] the tenant's set; ARGV: release, now, oldest kept, limit, key ttl, force (1 for a marker).
_ADMIT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
local known = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not known and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  if ARGV[6] ~= '1' then return 0 end
  redis.call('ZPOPMIN', KEYS[1])
end
redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])  -- adds a new release, moves a known one forward
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""

# Newest marker wins: KEYS[1] the hash; ARGV field, value, its timestamp.
_RECORD_MARKER = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and cjson.decode(current)['ts'] > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""

# Delete a field only if it still holds what the trimming replica read.
_DELETE_IF_UNCHANGED = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""


class RecentReleases:
    def __init__(self, client: redis.Redis, limit: int, window_s: float, refresh_s: float) -> None:
        self._admit = client.register_script(_ADMIT)
        self._limit = limit
        self._window_s = window_s
        self._refresh_s = refresh_s
        self._decided: dict[tuple[str, str], tuple[str, float]] = {}  # -> (label, valid until)

    def label(self, tenant: str, release: str, now: float) -> str:
        decided = self._decided.get((tenant, release))
        if decided is not None and decided[1] > now:
            return decided[0]
        admitted = self._call(tenant, release, now, force=False)
        return self._remember(tenant, release, release if admitted else OTHER, now)

    def announce(self, tenant: str, release: str, now: float) -> None:
        """A release marker: its release becomes a label value at once."""
        self._call(tenant, release, now, force=True)
        self._remember(tenant, release, release, now)

    def _call(self, tenant: str, release: str, now: float, force: bool) -> bool:
        ttl = int(self._window_s) + 60
        args: list[str | float | int] = [
            release,
            now,
            now - self._window_s,
            self._limit,
            ttl,
            "1" if force else "0",
        ]
        return bool(self._admit(keys=[RECENT_KEY + tenant], args=args))

    def _remember(self, tenant: str, release: str, label: str, now: float) -> str:
        if len(self._decided) > 100 * self._limit:  # bounded: forget what a purge would re-ask
            self._decided = {k: v for k, v in self._decided.items() if v[1] > now}
        self._decided[(tenant, release)] = (label, now + self._refresh_s)
        return label


@dataclass(frozen=True)
class Marker:
    tenant: str
    variant: str
    release: str
    ts: float


class CurrentReleases:
    def __init__(self, client: redis.Redis, max_variants: int) -> None:
        self._redis = client
        self._max_variants = max_variants
        self._record = client.register_script(_RECORD_MARKER)
        self._delete = client.register_script(_DELETE_IF_UNCHANGED)

    def record(self, marker: Marker) -> None:
        value = json.dumps({"release": marker.release, "ts": marker.ts})
        self._record(keys=[CURRENT_KEY], args=[f"{marker.tenant}\x1f{marker.variant}", value, marker.ts])

    def read_and_trim(self) -> list[Marker]:
        """Every tenant's kept markers; the entries beyond each tenant's variant cap are deleted."""
        by_tenant: dict[str, list[tuple[Marker, str, bytes | str]]] = {}
        for raw_field, raw in self._redis.hgetall(CURRENT_KEY).items():
            field = raw_field.decode() if isinstance(raw_field, bytes) else raw_field
            tenant, variant = field.split("\x1f", 1)
            entry = json.loads(raw)
            marker = Marker(tenant, variant, entry["release"], float(entry["ts"]))
            by_tenant.setdefault(tenant, []).append((marker, field, raw))
        kept: list[Marker] = []
        for entries in by_tenant.values():
            others = sorted(
                (e for e in entries if e[0].variant != ALWAYS_KEPT_VARIANT),
                key=lambda e: (-e[0].ts, e[0].variant),
            )  # most recently announced first
            kept += [marker for marker, _, _ in entries if marker.variant == ALWAYS_KEPT_VARIANT]
            kept += [marker for marker, _, _ in others[: self._max_variants]]
            for _, field, raw in others[self._max_variants :]:
                self._delete(keys=[CURRENT_KEY], args=[field, raw])
        return kept
