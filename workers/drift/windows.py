"""Reference and current windows of one signal, kept in Redis and shared by replicas.

Per signal (all keys share one hash tag, so each Lua script touches one slot):
  ref    ZSET event id -> received_at   the first N queries, or a frozen sample
  cur    ZSET event id -> received_at   the last N queries, bounded by age at test time
  vec    HASH event id -> float32 bytes the embeddings of both windows
  meta   HASH pending (new current queries since the last test), last_test, frozen
  result HASH the last test's outcome, read by every replica for its metrics
  lease  STRING the replica running the test now (SET NX PX)
Per stream (tenant, signal, intent): `models` ZSET of signal keys by last sighting,
which is how a new model or dimension is noticed. Globally: `index` ZSET of every
live signal key by last sighting, which is what tick() walks and retires.

Every write is idempotent by event id: an id already in either window is a no-op.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import redis

from service.contracts.driftflags import record_flag
from workers.drift.signals import SignalKey

# One call per signal and batch: ARGV[1] the reference size, ARGV[2] the current size, then per
# observation its event id, received_at and float32 bytes, in order. Returns one outcome per observation
# (ADDED_*), as that many calls one after another would.
_ADD = """
local ref_size, cur_size = tonumber(ARGV[1]), tonumber(ARGV[2])
local frozen = redis.call('HGET', KEYS[4], 'frozen') == '1'
local out = {}
for a = 3, #ARGV, 3 do
  local id, at = ARGV[a], ARGV[a + 1]
  if redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id) then
    out[#out + 1] = 0
  elseif not frozen and redis.call('ZCARD', KEYS[1]) < ref_size then
    redis.call('ZADD', KEYS[1], at, id)
    redis.call('HSET', KEYS[3], id, ARGV[a + 2])
    out[#out + 1] = 1
  else
    redis.call('ZADD', KEYS[2], at, id)
    redis.call('HSET', KEYS[3], id, ARGV[a + 2])
    local extra = redis.call('ZCARD', KEYS[2]) - cur_size
    if extra > 0 then
      local old = redis.call('ZRANGE', KEYS[2], 0, extra - 1)
      redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1)
      for i = 1, #old, 1000 do redis.call('HDEL', KEYS[3], unpack(old, i, math.min(i + 999, #old))) end
    end
    if redis.call('ZSCORE', KEYS[2], id) then
      redis.call('HINCRBY', KEYS[4], 'pending', 1)
      out[#out + 1] = 2
    else
      out[#out + 1] = 3
    end
  end
end
return out
"""

# Returns false for a known model, '' for the first model of a stream, else the
# previously most recent model: the one this model replaces.
_REGISTER_MODEL = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
  return false
end
local top = redis.call('ZREVRANGE', KEYS[1], 0, 0)
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if #top > 0 then return top[1] end
return ''
"""

_TRIM = """
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
if #old > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
  for i = 1, #old, 1000 do redis.call('HDEL', KEYS[2], unpack(old, i, math.min(i + 999, #old))) end
end
return #old
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# The largest squared norm of an embedding a window takes: its inner product with any other stays finite in
# float32 (|a.b| <= |a||b|), where the kernel's distances are computed (mmd.squared_distances). Real
# embeddings are near unit norm; a component beyond float32's range (1e39 is a finite JSON number, inf as
# float32) or a norm past this made the bandwidth NaN and mmd_test raise in tick() (docs/security.md).
MAX_SQUARED_NORM = 1e36


def float32_embedding(values: Any) -> np.ndarray:
    """An embedding as float32; a component beyond float32's range becomes inf (refused by comparable)."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float32)


def comparable(vector: np.ndarray) -> bool:
    """Whether a float32 embedding may be windowed or compared: its squared norm (float32, as the kernel
    computes it) is finite and at most MAX_SQUARED_NORM, so no component is inf or NaN either."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.dot(vector, vector) <= MAX_SQUARED_NORM)


ADDED_DUPLICATE, ADDED_REFERENCE, ADDED_CURRENT, ADDED_TOO_OLD = 0, 1, 2, 3
OUTCOMES = {
    ADDED_DUPLICATE: "duplicate",
    ADDED_REFERENCE: "reference",
    ADDED_CURRENT: "current",
    ADDED_TOO_OLD: "too_old",
}


@dataclass(frozen=True)
class Observation:
    key: SignalKey
    event_id: str
    received_at: float
    vector: np.ndarray  # float32, shape (key.dim,)


@dataclass(frozen=True)
class WindowStatus:
    reference: int
    current: int
    pending: int
    last_test: float  # 0 when never tested
    frozen: bool
    forced: bool  # a new frozen reference asks for a test without waiting for K or T


@dataclass(frozen=True)
class ModelChange:
    key: SignalKey
    previous: SignalKey


class WindowStore:
    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        reference_size: int,
        current_size: int,
        max_per_stream: int | None = None,
    ) -> None:
        self.redis = client
        self.prefix = prefix
        self.reference_size = reference_size
        self.current_size = current_size
        self.max_per_stream = max_per_stream  # signals a stream keeps (None: until they retire by age)
        self._add = client.register_script(_ADD)
        self._register = client.register_script(_REGISTER_MODEL)
        self._trim = client.register_script(_TRIM)
        self._release = client.register_script(_RELEASE)

    def key(self, sig: SignalKey, part: str) -> str:
        return f"{self.prefix}:{{{sig.id}}}:{part}"

    def _models_key(self, sig: SignalKey) -> str:
        return f"{self.prefix}:{{{sig.stream}}}:models"

    @property
    def index_key(self) -> str:
        return f"{self.prefix}:index"

    def add(self, observations: list[Observation]) -> tuple[list[str], list[ModelChange]]:
        """Register models, then add each observation, in order: one script call per signal, one round
        trip for the batch. Outcomes in the order of `observations`."""
        latest: dict[SignalKey, float] = {}
        positions: dict[SignalKey, list[int]] = {}
        for i, obs in enumerate(observations):
            latest[obs.key] = max(latest.get(obs.key, 0.0), obs.received_at)
            positions.setdefault(obs.key, []).append(i)
        pipe = self.redis.pipeline(transaction=False)
        for sig, seen in latest.items():
            self._register(keys=[self._models_key(sig)], args=[sig.encode(), seen], client=pipe)
            pipe.zadd(self.index_key, {sig.encode(): seen}, gt=True)
        for sig, indexes in positions.items():
            args: list[str | bytes | float | int] = [self.reference_size, self.current_size]
            for i in indexes:
                obs = observations[i]
                args += [obs.event_id, obs.received_at, obs.vector.astype("<f4").tobytes()]
            keys = [self.key(sig, p) for p in ("ref", "cur", "vec", "meta")]
            self._add(keys=keys, args=args, client=pipe)
        replies = pipe.execute()
        changes = []
        for i, sig in enumerate(latest):
            previous = replies[2 * i]
            if previous:  # neither None (known) nor b'' (first model of the stream)
                changes.append(ModelChange(sig, SignalKey.decode(previous)))
        self._keep_recent({change.key.stream: change.key for change in changes}.values())
        outcomes = [""] * len(observations)
        for indexes, codes in zip(positions.values(), replies[2 * len(latest) :], strict=True):
            for i, code in zip(indexes, codes, strict=True):
                outcomes[i] = OUTCOMES[int(code)]
        return outcomes, changes

    def _keep_recent(self, streams: Iterable[SignalKey]) -> None:
        """Retire the signals of each stream (one of its signals given) past its max_per_stream most
        recently seen. Only a new model or dimension can put a stream over: ordinary batches skip this."""
        if self.max_per_stream is None:
            return
        for sig in streams:
            stale = self.redis.zrange(self._models_key(sig), 0, -(self.max_per_stream + 1))
            for raw in cast(list[bytes], stale):
                self.retire(SignalKey.decode(raw), always=True)

    def signals(self) -> list[tuple[SignalKey, float]]:
        members = cast(list[tuple[bytes, float]], self.redis.zrange(self.index_key, 0, -1, withscores=True))
        return [(SignalKey.decode(m), float(s)) for m, s in members]

    def statuses(self, keys: list[SignalKey]) -> list[WindowStatus]:
        pipe = self.redis.pipeline(transaction=False)
        for sig in keys:
            pipe.zcard(self.key(sig, "ref"))
            pipe.zcard(self.key(sig, "cur"))
            pipe.hmget(self.key(sig, "meta"), ["pending", "last_test", "frozen", "forced"])
        replies = pipe.execute()
        out = []
        for i in range(len(keys)):
            ref, cur, (pending, last_test, frozen, forced) = replies[3 * i : 3 * i + 3]
            out.append(
                WindowStatus(
                    int(ref),
                    int(cur),
                    int(pending or 0),
                    float(last_test or 0.0),
                    frozen == b"1",
                    forced == b"1",
                )
            )
        return out

    def trim_current(self, sig: SignalKey, cutoff: float) -> int:
        return int(self._trim(keys=[self.key(sig, "cur"), self.key(sig, "vec")], args=[cutoff]))

    def trim_all(self, keys: list[SignalKey], cutoff: float) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for sig in keys:
            self._trim(keys=[self.key(sig, "cur"), self.key(sig, "vec")], args=[cutoff], client=pipe)
        pipe.execute()

    def read(self, sig: SignalKey) -> tuple[np.ndarray, np.ndarray]:
        """(reference, current) as float32 matrices, oldest first."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.zrange(self.key(sig, "ref"), 0, -1)
        pipe.zrange(self.key(sig, "cur"), 0, -1)
        ref_ids, cur_ids = pipe.execute()
        vectors = self.redis.hmget(self.key(sig, "vec"), ref_ids + cur_ids) if ref_ids or cur_ids else []
        return self._matrix(vectors[: len(ref_ids)], sig.dim), self._matrix(vectors[len(ref_ids) :], sig.dim)

    @staticmethod
    def _matrix(raw: list[Any], dim: int) -> np.ndarray:
        rows = [np.frombuffer(v, dtype="<f4") for v in raw if v is not None and len(v) == 4 * dim]
        if not rows:
            return np.empty((0, dim), dtype=np.float32)
        matrix = np.stack(rows).astype(np.float32)
        # An earlier version stored rows `comparable` refuses: checked for the whole matrix at once.
        with np.errstate(over="ignore", invalid="ignore"):
            keep = np.einsum("ij,ij->i", matrix, matrix) <= MAX_SQUARED_NORM
        return matrix if keep.all() else matrix[keep]

    def acquire_lease(self, sig: SignalKey, lease_s: float) -> str | None:
        token = uuid.uuid4().hex
        ok = self.redis.set(self.key(sig, "lease"), token, nx=True, px=max(1, int(lease_s * 1000)))
        return token if ok else None

    def release_lease(self, sig: SignalKey, token: str) -> None:
        self._release(keys=[self.key(sig, "lease")], args=[token])

    def record_test(self, sig: SignalKey, result: dict[str, float], tested_at: float, consumed: int) -> None:
        """Store the outcome and take the queries it covered off the pending count."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.key(sig, "result"))
        pipe.hset(self.key(sig, "result"), mapping=cast(Any, {**result, "tested_at": tested_at}))
        pipe.hset(self.key(sig, "meta"), "last_test", tested_at)
        pipe.hdel(self.key(sig, "meta"), "forced")
        pipe.hincrby(self.key(sig, "meta"), "pending", -consumed)
        pipe.execute()
        # The review sampler's drift stratum reads which windows are flagged (service/contracts/driftflags.py);
        # a key of its own slot, so written outside the transaction above.
        flags = self.redis.pipeline(transaction=False)
        record_flag(flags, self.prefix, sig.tenant, sig.intent, bool(result.get("drift")), tested_at)
        flags.execute()

    def results(self, keys: list[SignalKey]) -> list[dict[str, float]]:
        pipe = self.redis.pipeline(transaction=False)
        for sig in keys:
            pipe.hgetall(self.key(sig, "result"))
        return [{k.decode(): float(v) for k, v in r.items()} for r in pipe.execute()]

    def freeze(self, sig: SignalKey, vectors: np.ndarray, stamp: float) -> int:
        """Replace the reference with `vectors` and stop capturing it from traffic."""
        if vectors.ndim != 2 or vectors.shape[1] != sig.dim:
            raise ValueError(f"frozen reference must have shape (n, {sig.dim}), got {vectors.shape}")
        old = self.redis.zrange(self.key(sig, "ref"), 0, -1)
        ids = [f"frozen:{stamp:.6f}:{i:06d}" for i in range(len(vectors))]  # sorts in file order
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.key(sig, "ref"), self.key(sig, "result"))
        if old:
            pipe.hdel(self.key(sig, "vec"), *old)
        if ids:
            pipe.zadd(self.key(sig, "ref"), {i: stamp for i in ids})
            pipe.hset(
                self.key(sig, "vec"),
                mapping={i: v.astype("<f4").tobytes() for i, v in zip(ids, vectors, strict=True)},
            )
        pipe.hset(self.key(sig, "meta"), mapping={"frozen": 1, "forced": 1})
        pipe.zadd(self.index_key, {sig.encode(): stamp}, gt=True)
        pipe.zadd(self._models_key(sig), {sig.encode(): stamp}, gt=True)
        pipe.execute()
        return len(ids)

    def reset(self, sig: SignalKey) -> None:
        """Drop both windows: the next N queries become the reference again."""
        self.redis.delete(*(self.key(sig, p) for p in ("ref", "cur", "vec", "meta", "result", "lease")))

    def retire(self, sig: SignalKey, always: bool = False) -> bool:
        """Forget a signal not seen for a while; True for the one replica that removed it. `always`: also
        when the index no longer lists it (a stream over its cap is cleared whatever the index says)."""
        if not self.redis.zrem(self.index_key, sig.encode()) and not always:
            return False
        self.redis.zrem(self._models_key(sig), sig.encode())
        self.reset(sig)
        return True
