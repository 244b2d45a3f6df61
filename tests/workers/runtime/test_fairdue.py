"""Due sets shared between tenants, on the session's real Redis: read-only claims (the caller removes what
it takes), leases, the index, and an older version's one set moved by its separator."""

from __future__ import annotations

import redis

from workers.runtime.fairdue import TenantDueSets

NOW = 5_000.0


def _sets(client: redis.Redis, **kw: str) -> TenantDueSets:
    return TenantDueSets(client, "t:due", "t:set:", **kw)


def _fill(due: TenantDueSets, tenant: str, n: int, at: float = NOW) -> None:
    for i in range(n):
        due.set(tenant, f"{tenant}\x1f{i}", at + i * 1e-3)


def test_a_read_only_claim_shares_the_limit_and_reads_past_earlier_passes(redis_client: redis.Redis) -> None:
    due = _sets(redis_client)
    _fill(due, "big", 50, NOW - 100)
    _fill(due, "small", 3)
    claimed = due.claim(NOW + 1, 20)
    assert [m for t, m in claimed if t == "small"] == [f"small\x1f{i}" for i in range(3)]
    big = [m for t, m in claimed if t == "big"]
    assert big == [f"big\x1f{i}" for i in range(17)]  # in due order, none twice across the passes
    assert due.size() == 53  # read only: nothing moved
    assert due.claim(NOW + 1, 20) == claimed  # the caller did not remove them: the same again


def test_removing_what_was_taken_moves_the_claim_on(redis_client: redis.Redis) -> None:
    due = _sets(redis_client)
    _fill(due, "a", 4)
    for tenant, member in due.claim(NOW + 1, 2):
        due.remove(tenant, member)
    assert due.claim(NOW + 1, 10) == [("a", "a\x1f2"), ("a", "a\x1f3")]
    due.remove("a", "a\x1f2")
    due.remove("a", "a\x1f3")
    assert redis_client.zcard("t:due") == 0 and due.size() == 0


def test_a_leased_claim_hides_members_until_the_lease_ends(redis_client: redis.Redis) -> None:
    due = _sets(redis_client)
    _fill(due, "a", 2)
    _fill(due, "b", 2)
    assert len(due.claim(NOW + 1, 10, lease_s=30)) == 4
    assert due.claim(NOW + 2, 10, lease_s=30) == []
    assert redis_client.zscore("t:due", "a") == NOW + 31  # the index follows the leased scores
    assert len(due.claim(NOW + 32, 10, lease_s=30)) == 4


def test_nothing_is_due_before_its_score(redis_client: redis.Redis) -> None:
    due = _sets(redis_client)
    due.set("a", "a\x1fx", NOW + 10)
    assert due.claim(NOW, 10) == [] and due.size() == 1


def test_an_older_versions_set_is_moved_by_its_separator(redis_client: redis.Redis) -> None:
    redis_client.zadd("t:old", {"a\x1f1": NOW - 1, "b\x1f1": NOW - 2, "a\x1f2": NOW + 50})
    due = _sets(redis_client, legacy_key="t:old", separator="\x1f")
    assert sorted(due.claim(NOW, 10)) == [("a", "a\x1f1"), ("b", "b\x1f1")]
    assert not redis_client.exists("t:old") and due.size() == 3
    assert redis_client.zscore("t:set:a", "a\x1f2") == NOW + 50


def test_the_sets_replacing_an_older_set_are_named_after_it(redis_client: redis.Redis) -> None:
    redis_client.zadd("w:idle", {"a\x1f1": NOW - 1})
    due = TenantDueSets.replacing(redis_client, "w", "idle", separator="\x1f")
    assert (due.index_key, due.key("a")) == ("w:due", "w:idle:a")
    assert due.claim(NOW, 10) == [("a", "a\x1f1")] and not redis_client.exists("w:idle")
