"""The assembler's state in Redis: the spans of each open trace, and when each trace is due.

Per trace `<prefix>:{<tenant>/<trace>}:spans` (hash: span id -> Span protobuf),
`...:logs` (hash: digest of the record -> LogRecord protobuf, the GenAI message events of
POST /v1/logs, joined to their spans when the trace is assembled),
`...:meta` (hash: count, bytes, root, last, overflow, resource; lcount, lbytes, loverflow
for the log records) and, once the trace
was emitted or dropped, `...:done` (a marker with a TTL, so later spans are counted
as late instead of opening the trace again). Each tenant's sorted set `<prefix>:pending:<tenant>`
holds its open traces scored by when to look at them next, and `<prefix>:due` holds every tenant with
open traces scored by its earliest one (workers/runtime/fairdue.py). Claiming shares a tick between the
tenants that have traces due (equal shares, what one leaves to those with more), so a tenant that opens
many traces delays its own assembly, never another tenant's. A `<prefix>:pending` left by an older
version (one set for all tenants) is moved into the tenants' sets at the first claim.

Adding is idempotent (a span id already stored is a duplicate), so a redelivered
record after a kill -9 changes nothing; every key has a TTL, and a trace holds at
most max_bytes, max_spans spans the mapping reads (RETRIEVER, RERANKER, LLM, EMBEDDING)
and max_spans others; the root span is always kept, so an oversized trace still completes
with what matters to its event. Log records have caps of their own (max_logs, max_log_bytes): a
trace's log records never take the room of its spans. A log record opens a trace like a span
(early: its spans come later), resets its quiet period, and after the trace was emitted is late.
"""

from __future__ import annotations

from typing import NamedTuple

import redis

from workers.runtime.fairdue import REINDEX_LUA, TenantDueSets

# What adding spans and adding log records share. KEYS: the hash the entries go to (spans or logs), meta,
# done, the tenant's due set, the due index (workers/runtime/fairdue.py). ARGV: now, quiet, (two caps), ttl,
# member. `entries` walks the packed "<id>:<length>" list over the payloads concatenated in its order;
# `put` stores one entry (true) unless it is a duplicate or `full`, counting which in `dup` and `over`;
# `touch` after storing any: the trace's hashes live another ttl and its quiet period starts again.
_ENTRIES_LUA = (
    REINDEX_LUA
    + """
local function entries(list, blob)
  local next_entry, pos = string.gmatch(list, '([^:,]+):(%d+)'), 1
  return function()
    local id, len = next_entry()
    if id == nil then return nil end
    len = tonumber(len)
    local payload = string.sub(blob, pos, pos + len - 1)
    pos = pos + len
    return id, payload, len
  end
end
local dup, over = 0, 0
local function put(id, payload, full)
  if full then
    if redis.call('HEXISTS', KEYS[1], id) == 1 then dup = dup + 1 else over = over + 1 end
    return false
  end
  if redis.call('HSETNX', KEYS[1], id, payload) == 0 then
    dup = dup + 1
    return false
  end
  return true
end
local function touch(tenant)
  redis.call('EXPIRE', KEYS[1], ARGV[5])
  redis.call('EXPIRE', KEYS[2], ARGV[5])
  redis.call('ZADD', KEYS[4], tonumber(ARGV[1]) + tonumber(ARGV[2]), ARGV[6])
  reindex(KEYS[4], KEYS[5], tenant)
end
"""
)

# KEYS: spans, meta, done, the tenant's due set, the due index.
# ARGV: now, quiet, max spans, max bytes, ttl, member, resource, the spans as "<class><span id hex>:<length>"
# joined by ",", their count, and their payloads concatenated in the same order: ten arguments whatever the
# number of spans (the client packs and the server parses a few arguments, not three per span), then the tenant.
_ADD = (
    _ENTRIES_LUA
    + """
local n = tonumber(ARGV[9])
if redis.call('EXISTS', KEYS[3]) == 1 then return {0, 0, 0, n} end
local meta = redis.call('HMGET', KEYS[2], 'count', 'mapped', 'bytes')
local count, mapped, bytes = tonumber(meta[1] or '0'), tonumber(meta[2] or '0'), tonumber(meta[3] or '0')
local max_spans, max_bytes = tonumber(ARGV[3]), tonumber(ARGV[4])
local stored = 0
for id, payload, len in entries(ARGV[8], ARGV[10]) do
  local class, sid = string.sub(id, 1, 1), string.sub(id, 2)
  local full = bytes + len > max_bytes
  if class == '1' then full = full or mapped >= max_spans elseif class == '0' then full = full or count >= max_spans end
  if put(sid, payload, class ~= '2' and full) then
    if class == '1' then mapped = mapped + 1 elseif class == '0' then count = count + 1 end
    bytes = bytes + len
    stored = stored + 1
    if class == '2' then redis.call('HSET', KEYS[2], 'root', sid) end
  end
end
if over > 0 then redis.call('HINCRBY', KEYS[2], 'overflow', over) end
if stored > 0 then
  redis.call('HINCRBY', KEYS[2], 'stored', stored)
  redis.call('HSET', KEYS[2], 'count', count, 'mapped', mapped, 'bytes', bytes, 'last', ARGV[1])
  redis.call('HSETNX', KEYS[2], 'resource', ARGV[7])
  touch(ARGV[11])
end
return {stored, dup, over, 0}
"""
)

# KEYS: logs, meta, done, the tenant's due set, the due index.
# ARGV: now, quiet, max logs, max log bytes, ttl, member, the records as "<digest>:<length>" joined by ",",
# their count, their payloads concatenated in the same order, the tenant.
_ADD_LOGS = (
    _ENTRIES_LUA
    + """
local n = tonumber(ARGV[8])
if redis.call('EXISTS', KEYS[3]) == 1 then return {0, 0, 0, n} end
local meta = redis.call('HMGET', KEYS[2], 'lcount', 'lbytes')
local count, bytes = tonumber(meta[1] or '0'), tonumber(meta[2] or '0')
local max_logs, max_bytes = tonumber(ARGV[3]), tonumber(ARGV[4])
local stored = 0
for id, payload, len in entries(ARGV[7], ARGV[9]) do
  if put(id, payload, count >= max_logs or bytes + len > max_bytes) then
    count = count + 1
    bytes = bytes + len
    stored = stored + 1
  end
end
if over > 0 then redis.call('HINCRBY', KEYS[2], 'loverflow', over) end
if stored > 0 then
  redis.call('HINCRBY', KEYS[2], 'lstored', stored)
  redis.call('HSET', KEYS[2], 'lcount', count, 'lbytes', bytes, 'last', ARGV[1])
  touch(ARGV[10])
end
return {stored, dup, over, 0}
"""
)

_FINISH = (
    REINDEX_LUA
    + """
local counts = redis.call('HMGET', KEYS[2], 'stored', 'lstored')
local count, lcount = tonumber(counts[1] or '0'), tonumber(counts[2] or '0')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[5])
redis.call('SET', KEYS[3], '1', 'EX', ARGV[3])
redis.call('ZREM', KEYS[4], ARGV[1])
reindex(KEYS[4], KEYS[6], ARGV[5])
return {math.max(0, count - tonumber(ARGV[2])), math.max(0, lcount - tonumber(ARGV[4]))}
"""
)


class AddResult(NamedTuple):  # immutable; a tuple is built several times faster than a frozen dataclass
    stored: int
    duplicates: int
    overflow: int
    late: int


class OpenTrace(NamedTuple):  # immutable; a tuple is built several times faster than a frozen dataclass
    tenant: str
    trace_id: str
    spans: list[bytes]
    root: str | None
    last_seen: float
    overflow: int
    resource: bytes
    logs: tuple[bytes, ...] | list[bytes] = ()  # LogRecord payloads (POST /v1/logs), joined at assembly


ROOT, MAPPED, OTHER = "2", "1", "0"  # a span's class: each has its own cap (see _ADD)


class LogEntry(NamedTuple):
    digest: str  # of the payload: a resent export's record is a duplicate
    payload: bytes  # a LogRecord protobuf


class FinishResult(NamedTuple):
    late_spans: int  # stored after the trace was loaded
    late_logs: int


class SpanEntry(NamedTuple):  # immutable; a tuple is built several times faster than a frozen dataclass
    span_id: str
    span_class: str  # ROOT, MAPPED or OTHER
    payload: bytes


class TraceStore:
    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        *,
        quiet_s: float,
        max_spans: int,
        max_bytes: int,
        ttl_s: int,
        done_ttl_s: int,
        lease_s: float,
        max_logs: int = 2_000,
        max_log_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self.client = client
        self.prefix = prefix
        # each tenant's open traces, scored by when they are due; an older version had one set for all
        self.due = TenantDueSets.replacing(client, prefix, "pending")
        self.quiet_s, self.max_spans, self.max_bytes = quiet_s, max_spans, max_bytes
        self.ttl_s, self.done_ttl_s, self.lease_s = ttl_s, done_ttl_s, lease_s
        self.max_logs, self.max_log_bytes = max_logs, max_log_bytes
        self._add = client.register_script(_ADD)
        self._add_logs = client.register_script(_ADD_LOGS)
        self._finish = client.register_script(_FINISH)

    def _keys(self, tenant: str, trace_id: str) -> list[str]:
        tag = f"{self.prefix}:{{{tenant}/{trace_id}}}"  # one hash slot per trace
        return [f"{tag}:spans", f"{tag}:meta", f"{tag}:done", self.due.key(tenant), f"{tag}:logs"]

    def add_many(self, items: list[tuple[str, str, bytes, list[SpanEntry]]], now: float) -> list[AddResult]:
        """Store each (tenant, trace id, resource, spans) in one round trip; results in the same order."""
        pipe = self.client.pipeline(transaction=False)
        for tenant, trace_id, resource, spans in items:
            args: list[bytes | str | float | int] = [
                now,
                self.quiet_s,
                self.max_spans,
                self.max_bytes,
                self.ttl_s,
                f"{tenant}/{trace_id}",
                resource,
                ",".join(f"{e.span_class}{e.span_id}:{len(e.payload)}" for e in spans),
                len(spans),
                b"".join(e.payload for e in spans),
                tenant,
            ]
            self._add(keys=[*self._keys(tenant, trace_id)[:4], self.due.index_key], args=args, client=pipe)
        return [AddResult(*(int(x) for x in r)) for r in pipe.execute()] if items else []

    def add_logs(self, items: list[tuple[str, str, list[LogEntry]]], now: float) -> list[AddResult]:
        """Store each (tenant, trace id, log records) in one round trip; results in the same order."""
        pipe = self.client.pipeline(transaction=False)
        for tenant, trace_id, logs in items:
            keys = self._keys(tenant, trace_id)
            args: list[bytes | str | float | int] = [
                now,
                self.quiet_s,
                self.max_logs,
                self.max_log_bytes,
                self.ttl_s,
                f"{tenant}/{trace_id}",
                ",".join(f"{e.digest}:{len(e.payload)}" for e in logs),
                len(logs),
                b"".join(e.payload for e in logs),
                tenant,
            ]
            self._add_logs(
                keys=[keys[4], keys[1], keys[2], keys[3], self.due.index_key], args=args, client=pipe
            )
        return [AddResult(*(int(x) for x in r)) for r in pipe.execute()] if items else []

    def claim_due(self, now: float, limit: int) -> list[tuple[str, str]]:
        """Up to `limit` due traces, shared between the tenants that have some; each is leased."""
        return [
            (tenant, member.partition("/")[2]) for tenant, member in self.due.claim(now, limit, self.lease_s)
        ]

    def load_many(self, members: list[tuple[str, str]]) -> list[OpenTrace | None]:
        """Each trace's spans and meta in one round trip (and, in a second, the log records of the traces
        that have some: a trace without pays nothing for them); None where the state expired."""
        pipe = self.client.pipeline(transaction=False)
        for tenant, trace_id in members:
            spans_key, meta_key, _, _, _ = self._keys(tenant, trace_id)
            pipe.hvals(spans_key)  # the payloads only: the span ids are inside them
            pipe.hmget(meta_key, "root", "last", "overflow", "resource", "lcount")
        replies = pipe.execute() if members else []
        with_logs = [i for i, meta in enumerate(replies[1::2]) if meta[4] not in (None, b"0")]
        logs_of: dict[int, list[bytes]] = {}
        if with_logs:
            pipe = self.client.pipeline(transaction=False)
            for i in with_logs:
                pipe.hvals(self._keys(*members[i])[4])
            logs_of = dict(zip(with_logs, pipe.execute(), strict=True))
        out: list[OpenTrace | None] = []
        for i, ((tenant, trace_id), spans, meta) in enumerate(
            zip(members, replies[0::2], replies[1::2], strict=True)
        ):
            root, last, overflow, resource, _ = meta
            logs = logs_of.get(i, ())
            if not (spans or logs) or last is None:  # expired (TTL): `last` is set whenever one is stored
                out.append(None)
                continue
            out.append(
                OpenTrace(
                    tenant,
                    trace_id,
                    spans,
                    root.decode() if root else None,
                    float(last),
                    int(overflow or 0),
                    resource or b"",
                    logs,
                )
            )
        return out

    def reschedule(self, tenant: str, trace_id: str, at: float) -> None:
        self.due.set(tenant, f"{tenant}/{trace_id}", at)

    def forget(self, tenant: str, trace_id: str) -> None:
        """A pending entry whose state expired (TTL): nothing left to assemble."""
        self.due.remove(tenant, f"{tenant}/{trace_id}")

    def finish_many(self, traces: list[OpenTrace]) -> list[FinishResult]:
        """Close traces whose events were acknowledged (or that were dropped), in one round trip.

        Returns, per trace, the spans and the log records stored after it was loaded: they are late.
        """
        pipe = self.client.pipeline(transaction=False)
        for trace in traces:
            keys = self._keys(trace.tenant, trace.trace_id)
            self._finish(
                keys=[*keys, self.due.index_key],
                args=[
                    f"{trace.tenant}/{trace.trace_id}",
                    len(trace.spans),
                    self.done_ttl_s,
                    len(trace.logs),
                    trace.tenant,
                ],
                client=pipe,
            )
        return [FinishResult(int(s), int(g)) for s, g in pipe.execute()] if traces else []

    def pending(self) -> int:
        """Open traces of every tenant."""
        return self.due.size()
