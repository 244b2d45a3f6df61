"""Component change markers: declared ones, and the ones ragmon notices by itself in traces.

A release marker may name the component that changed (docs/markers.md). Besides, a provider can swap
the model behind a name, or an app can move to a new embedding model or index without announcing it:
the traces say so. Per tenant, three components are watched in production traces:

- generator_model: `usage.model`,
- embedding_model: `query.embedding_model`, else `retrieval.index_embedding_model`,
- index: `retrieval.index_version`.

ChangeDetector counts each watched value over windows of at least `min_traces` traces AND `min_seconds`
(whichever closes later). When a window closes, a value other than the established one that holds more
than `enter_share` of it, while the established one fell below `exit_share`, is a change: established
becomes the new value and a marker (component, from, to, detected) is recorded. A 10% canary never
reaches 60%; a 50/50 split moves nothing either way (hysteresis). The first value a tenant establishes
is no change (nothing to change from).

Agreed across replicas: each process adds its batch's counts to the window kept in Redis by one script
(atomic), and the script that closes a window is the only one that returns the change, so a change is
recorded once whichever replica saw the deciding trace. Bounded: a window counts at most `max_values`
distinct values per (tenant, component), later ones into `other`, which never becomes established (a
tenant sending garbage model names adds no label value); a window's key expires when its tenant goes
quiet.

ChangeMarkers keeps the newest marker per (tenant, component), declared or detected, in one Redis hash
(newest wins, as release markers do); a detected change to the version a declared marker already named
keeps the declared one. It is the source of ragmon_release_component_change_timestamp_seconds.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import redis

WINDOW_KEY = "ragmon:changes:window:"  # + tenant \x1f component: HASH established, since, start, n, c:<value>
MARKERS_KEY = "ragmon:changes"  # HASH "tenant\x1fcomponent" -> {"from", "to", "source", "ts"}
DETECTED, DECLARED = "detected", "declared"
UNKNOWN_FROM = "unknown"  # a declared marker that names no `from`
_OTHER_BUCKET = "\0other"  # the window's count of values past its cap (never established)
WATCHED = ("generator_model", "embedding_model", "index")

# KEYS[1] the window. ARGV: now, min traces, min seconds, enter share, exit share, max values, ttl,
# then value, count pairs. Returns {from, to} when this call closed a window that changes the established
# value, else {}.
_ADD = """
local key = KEYS[1]
local now = tonumber(ARGV[1])
if redis.call('HSETNX', key, 'start', ARGV[1]) == 1 then redis.call('HSET', key, 'n', 0) end
local distinct = tonumber(redis.call('HGET', key, 'distinct') or '0')
for i = 8, #ARGV, 2 do
  local field = 'c:' .. ARGV[i]
  if ARGV[i] ~= '\0other' and redis.call('HEXISTS', key, field) == 0 then
    if distinct >= tonumber(ARGV[6]) then
      field = 'c:' .. '\\0other'
    else
      distinct = distinct + 1
    end
  end
  redis.call('HINCRBY', key, field, ARGV[i + 1])
  redis.call('HINCRBY', key, 'n', ARGV[i + 1])
end
redis.call('HSET', key, 'distinct', distinct)
redis.call('EXPIRE', key, ARGV[7])
local n = tonumber(redis.call('HGET', key, 'n'))
local start = tonumber(redis.call('HGET', key, 'start'))
if n < tonumber(ARGV[2]) or now - start < tonumber(ARGV[3]) then return {} end
local established = redis.call('HGET', key, 'established')
local top, top_count, old_count = nil, 0, 0
local all = redis.call('HGETALL', key)
for i = 1, #all, 2 do
  local f = all[i]
  if string.sub(f, 1, 2) == 'c:' then
    local value, count = string.sub(f, 3), tonumber(all[i + 1])
    if value ~= '\\0other' and count > top_count then top, top_count = value, count end
    if value == established then old_count = count end
    redis.call('HDEL', key, f)
  end
end
redis.call('HSET', key, 'n', 0, 'start', ARGV[1], 'distinct', 0)
if top == nil or top_count <= tonumber(ARGV[4]) * n then return {} end
if not established then
  redis.call('HSET', key, 'established', top, 'since', ARGV[1])
  return {}
end
if top == established or old_count >= tonumber(ARGV[5]) * n then return {} end
redis.call('HSET', key, 'established', top, 'since', ARGV[1])
return {established, top}
"""

# Newest wins; a detected marker does not replace a declared one that already named its `to`.
# KEYS[1] the hash; ARGV field, value, ts, source, to.
_RECORD = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current then
  local c = cjson.decode(current)
  if c['ts'] > tonumber(ARGV[3]) then return 0 end
  if ARGV[4] == 'detected' and c['source'] == 'declared' and c['to'] == ARGV[5] then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


@dataclass(frozen=True)
class ChangeMarker:
    tenant: str
    component: str
    from_: str
    to: str
    source: str
    ts: float


@dataclass(frozen=True)
class Hysteresis:
    min_traces: int
    min_seconds: float
    enter_share: float
    exit_share: float
    max_values: int


def watched_values(trace: Any) -> tuple[tuple[str, str | None], ...]:
    """(component, value) of a trace's watched fields (a metrics view of a trace)."""
    return (
        ("generator_model", trace.usage.model),
        ("embedding_model", trace.query.embedding_model or trace.retrieval.index_embedding_model),
        ("index", trace.retrieval.index_version),
    )


class ChangeMarkers:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._record = client.register_script(_RECORD)

    def record(self, m: ChangeMarker) -> bool:
        value = json.dumps({"from": m.from_, "to": m.to, "source": m.source, "ts": m.ts})
        field = f"{m.tenant}\x1f{m.component}"
        return bool(self._record(keys=[MARKERS_KEY], args=[field, value, m.ts, m.source, m.to]))

    def read(self) -> list[ChangeMarker]:
        out: list[ChangeMarker] = []
        for raw_field, raw in self._redis.hgetall(MARKERS_KEY).items():
            field = raw_field.decode() if isinstance(raw_field, bytes) else raw_field
            tenant, component = field.split("\x1f", 1)
            e = json.loads(raw)
            out.append(ChangeMarker(tenant, component, e["from"], e["to"], e["source"], float(e["ts"])))
        return out


class ChangeDetector:
    """Counts watched values per batch in process; one Redis script call per (tenant, component) touched."""

    def __init__(self, client: redis.Redis, rules: Hysteresis, markers: ChangeMarkers) -> None:
        self._redis = client
        self._add = client.register_script(_ADD)
        self._rules = rules
        self._markers = markers
        self._pending: dict[tuple[str, str], Counter[str]] = {}

    def discard_pending(self) -> None:
        """Forget what a batch observed without flushing it (its try failed: the retry observes it again)."""
        self._pending = {}

    def observe(self, tenant: str, trace: Any) -> None:
        for component, value in watched_values(trace):
            if value is not None:
                self._pending.setdefault((tenant, component), Counter())[value] += 1

    def flush(self, now: float) -> list[ChangeMarker]:
        """Adds the batch's counts to the shared windows; records and returns the changes they decided."""
        if not self._pending:
            return []
        pending, self._pending = self._pending, {}
        r = self._rules
        ttl = int(max(r.min_seconds * 4, 3600))
        pipe = self._redis.pipeline(transaction=False)
        keys = sorted(pending)
        for tenant, component in keys:
            counts = pending[(tenant, component)]
            pairs: list[str | int] = []
            kept = counts.most_common(r.max_values)  # the script caps again, over all replicas
            for value, n in kept:
                pairs += [value, n]
            rest = counts.total() - sum(n for _, n in kept)
            if rest:
                pairs += [_OTHER_BUCKET, rest]
            args: list[str | int | float] = [
                now,
                r.min_traces,
                r.min_seconds,
                r.enter_share,
                r.exit_share,
                r.max_values,
                ttl,
                *pairs,
            ]
            self._add(keys=[WINDOW_KEY + f"{tenant}\x1f{component}"], args=args, client=pipe)
        changes: list[ChangeMarker] = []
        for (tenant, component), result in zip(keys, pipe.execute(), strict=True):
            if result:
                old, new = (x.decode() if isinstance(x, bytes) else x for x in result)
                marker = ChangeMarker(tenant, component, old, new, DETECTED, now)
                if self._markers.record(marker):
                    changes.append(marker)
        return changes
