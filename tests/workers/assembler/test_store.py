"""The assembler's trace store on the session's real Redis: claims shared between tenants, leases, the
tenants' index kept exact through add, reschedule, forget and finish, and an older version's one
pending set moved into the tenants' sets."""

from __future__ import annotations

import redis

from workers.assembler.store import OpenTrace, SpanEntry, TraceStore

NOW = 1_000_000.0


def _store(client: redis.Redis, lease_s: float = 60.0) -> TraceStore:
    return TraceStore(
        client,
        "asm",
        quiet_s=0,
        max_spans=10,
        max_bytes=1 << 20,
        ttl_s=3600,
        done_ttl_s=3600,
        lease_s=lease_s,
    )


def _open(store: TraceStore, tenant: str, n: int, now: float = NOW) -> None:
    items = [(tenant, f"t{i}", b"r", [SpanEntry(f"s{i}", "2", b"payload")]) for i in range(n)]
    for start in range(0, n, 500):
        assert all(r.stored == 1 for r in store.add_many(items[start : start + 500], now))


def _by_tenant(claimed: list[tuple[str, str]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for tenant, _ in claimed:
        out[tenant] = out.get(tenant, 0) + 1
    return out


def test_a_tenant_with_thousands_due_does_not_delay_one_with_a_few(redis_client: redis.Redis) -> None:
    store = _store(redis_client)
    _open(store, "flood", 3000, NOW - 10)  # due first, and many
    _open(store, "quiet", 5)
    claimed = store.claim_due(NOW, 100)
    assert _by_tenant(claimed) == {"flood": 95, "quiet": 5}
    assert len(set(claimed)) == 100


def test_tenants_with_more_due_than_their_share_split_what_is_left(redis_client: redis.Redis) -> None:
    store = _store(redis_client)
    _open(store, "a", 300)
    _open(store, "b", 300)
    _open(store, "c", 2)
    # a pass of 33 each (c takes its 2), then the 32 left between a and b
    assert _by_tenant(store.claim_due(NOW, 100)) == {"a": 49, "b": 49, "c": 2}
    assert _by_tenant(store.claim_due(NOW, 100)) == {"a": 50, "b": 50}  # leased ones are not claimed again


def test_a_lease_hides_a_claimed_trace_until_it_ends(redis_client: redis.Redis) -> None:
    store = _store(redis_client, lease_s=30)
    _open(store, "acme", 3)
    assert len(store.claim_due(NOW, 10)) == 3
    assert store.claim_due(NOW + 29, 10) == []
    assert sorted(store.claim_due(NOW + 31, 10)) == [("acme", "t0"), ("acme", "t1"), ("acme", "t2")]
    assert store.pending() == 3


def test_the_index_follows_every_change_and_empties_with_the_sets(redis_client: redis.Redis) -> None:
    store = _store(redis_client)
    _open(store, "acme", 2)
    _open(store, "beta", 1)
    assert store.pending() == 3
    assert redis_client.zscore(store.due.index_key, "acme") == NOW
    store.reschedule("acme", "t0", NOW + 100)
    store.reschedule("acme", "t1", NOW + 50)
    assert redis_client.zscore(store.due.index_key, "acme") == NOW + 50  # its earliest trace's score
    assert store.claim_due(NOW, 10) == [("beta", "t0")]
    store.forget("beta", "t0")
    assert redis_client.zscore(store.due.index_key, "beta") is None and store.pending() == 2
    [t1] = store.claim_due(NOW + 60, 10)
    [trace] = store.load_many([t1])
    assert isinstance(trace, OpenTrace)
    assert store.finish_many([trace])[0].late_spans == 0
    assert redis_client.zscore(store.due.index_key, "acme") == NOW + 100 and store.pending() == 1
    store.forget("acme", "t0")
    assert redis_client.zcard(store.due.index_key) == 0 and store.pending() == 0


def test_an_older_versions_pending_set_is_moved_at_the_first_claim(redis_client: redis.Redis) -> None:
    store = _store(redis_client)
    _open(store, "acme", 1)  # opened by this version, due at NOW
    legacy = {f"acme/old{i}": NOW - 5 for i in range(1500)} | {"beta/old": NOW + 20, "acme/t0": NOW - 1}
    redis_client.zadd("asm:pending", legacy)
    claimed = store.claim_due(NOW, 5000)
    assert not redis_client.exists("asm:pending")
    assert _by_tenant(claimed) == {"acme": 1501}  # acme/t0 once, at the earlier of its two scores
    assert redis_client.zscore(store.due.index_key, "beta") == NOW + 20
    assert store.claim_due(NOW + 21, 10) == [("beta", "old")]
