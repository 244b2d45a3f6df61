"""Which traces get scored: a deterministic sample by request id, then a pairs-per-second budget.

Sampling hashes (tenant, request id), never the trace id, so a production trace
and its shadow twins (same request id) are in or out together, on every worker
and after every restart; the shadow comparison then always has both sides.

The budget is a token bucket of pairs per second per worker. It decides once
per request id and remembers the decision for a while (bounded), so a twin
arriving after its production trace gets the same answer even when the
bucket has run dry in between: an admitted request's twins may overdraw the
bucket, which the following quiet time pays back.

The bucket is shared fairly: each tenant that asked within the last
`burst_seconds` has a bucket of its own holding an equal share of the rate and
capacity (the whole of both when it is alone), and a request is admitted when
the worker's bucket has the pairs and either the tenant's share has them too or
the worker's bucket keeps half its capacity besides (what the others leave is
not wasted) and the tenant's share is not in debt. The worker's bucket goes at
most one capacity into debt; a tenant's share carries all of its debt (an answer
of thousands of sentences is thousands of pairs), kept while it is quiet. One
tenant flooding sampled requests (it picks the request ids) or huge ones gets
its share and the spare, never the others' share (docs/security.md).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

SAMPLE_SCALE = float(1 << 64)


def sample_point(tenant: str, request_id: str) -> float:
    """A uniform value in [0, 1) fixed by the request: traces of one request share it."""
    digest = hashlib.blake2b(f"{tenant}\x00{request_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / SAMPLE_SCALE


def sampled(tenant: str, request_id: str, rate: float) -> bool:
    return sample_point(tenant, request_id) < rate


class _Share:
    __slots__ = ("asked", "tokens", "updated")

    def __init__(self, tokens: float, now: float) -> None:
        self.tokens = tokens
        self.updated = now
        self.asked = now


class PairBudget:
    """Token bucket of pairs shared fairly by the tenants asking, with one remembered decision per request."""

    def __init__(
        self, pairs_per_second: float, burst_seconds: float, now: float, memory: int = 65_536
    ) -> None:
        self.rate = pairs_per_second
        self.capacity = pairs_per_second * burst_seconds
        self.tokens = self.capacity
        self._updated = now
        self._memory = memory
        self._decisions: OrderedDict[tuple[str, str], bool] = OrderedDict()
        self._active_s = burst_seconds  # a tenant that asked within this long holds a share
        self._shares: dict[str, _Share] = {}
        self._next_prune = now

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._updated)
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self._updated = max(self._updated, now)

    def _share(self, tenant: str, now: float) -> tuple[_Share, float]:
        """The tenant's share, refilled, and its capacity (the worker's, divided by the tenants asking)."""
        if now >= self._next_prune:  # tenants quiet for a while give their share back
            self._next_prune = now + 1.0
            oldest, rate = now - self._active_s, self.rate / max(1, len(self._shares))
            for quiet in [
                t
                for t, sh in self._shares.items()
                if sh.asked < oldest and sh.tokens + (now - sh.updated) * rate >= 0  # a debt is kept
            ]:
                del self._shares[quiet]
        share = self._shares.get(tenant)
        n = len(self._shares) + (share is None)
        capacity = self.capacity / n
        if share is None:
            share = self._shares[tenant] = _Share(capacity, now)
        else:
            elapsed = max(0.0, now - share.updated)
            share.tokens = min(capacity, share.tokens + elapsed * self.rate / n)
            share.updated = max(share.updated, now)
            share.asked = max(share.asked, now)
        return share, capacity

    def admit(self, tenant: str, request_id: str, pairs: int, now: float) -> bool:
        """Whether `pairs` may be scored now for this request; consumes them when yes."""
        self._refill(now)
        share, capacity = self._share(tenant, now)
        key = (tenant, request_id)
        decision = self._decisions.get(key)
        if decision is None:
            # A request needing more than the whole bucket still runs once the bucket is full,
            # rather than never.
            need = min(pairs, self.capacity)
            decision = self.tokens >= need and (
                share.tokens >= min(pairs, capacity)
                or (share.tokens >= 0 and self.tokens - need >= self.capacity / 2)
            )
            self._remember(key, decision)
        else:
            self._decisions.move_to_end(key)
        if decision:
            # Twins of an admitted request may overdraw the worker's bucket, but not without limit; the
            # tenant's share pays every pair (a request larger than the bucket is paid back at its rate).
            self.tokens = max(self.tokens - pairs, -self.capacity)
            share.tokens -= pairs
        return decision

    def _remember(self, key: tuple[str, str], decision: bool) -> None:
        self._decisions[key] = decision
        while len(self._decisions) > self._memory:
            self._decisions.popitem(last=False)
