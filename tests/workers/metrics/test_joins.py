"""Parked feedback on the session's real Redis: each tenant's deadlines apart, the sweep shared between
tenants, the index exact, and an older version's one deadline set moved at the first sweep."""

from __future__ import annotations

import redis

from workers.metrics.joins import FeedbackJoin, JoinInfo

T0 = 1_000_000.0


def _park(join: FeedbackJoin, tenant: str, n: int, now: float) -> None:
    for i in range(n):
        payload = {"kind": "thumbs", "value": False}
        assert join.feedback_arrived(tenant, f"trace{i}", f"{tenant}-fb{i}", payload, now=now) is None


def test_a_tenant_parking_thousands_does_not_delay_another_tenants_unjoined(
    redis_client: redis.Redis,
) -> None:
    join = FeedbackJoin(redis_client, join_ttl_s=600, park_s=10)
    _park(join, "flood", 2000, T0 - 60)  # past its wait long before the quiet tenant's
    _park(join, "quiet", 4, T0)
    swept = join.claim_expired(now=T0 + 11, limit=100)
    tenants = [tenant for tenant, _ in swept]
    assert tenants.count("quiet") == 4 and tenants.count("flood") == 96
    assert len({p.event_id for _, p in swept}) == 100


def test_a_trace_arriving_takes_its_feedback_out_of_the_sweep(redis_client: redis.Redis) -> None:
    join = FeedbackJoin(redis_client, join_ttl_s=600, park_s=10)
    _park(join, "acme", 2, T0)
    [parked] = join.trace_arrived("acme", "trace0", "t0", JoinInfo("prod", None, None))
    assert parked.event_id == "acme-fb0"
    assert [p.event_id for _, p in join.claim_expired(now=T0 + 11)] == ["acme-fb1"]
    assert redis_client.zcard("ragmon:join:due") == 0, "no tenant left in the index"


def test_an_older_versions_deadline_set_is_swept_once(redis_client: redis.Redis) -> None:
    old = FeedbackJoin(redis_client, join_ttl_s=600, park_s=10)
    _park(old, "acme", 3, T0)
    # as the older version kept them: every tenant's deadlines in one set
    for member, score in redis_client.zrange("ragmon:join:deadlines:acme", 0, -1, withscores=True):
        redis_client.zadd("ragmon:join:deadlines", {member: score})
    redis_client.delete("ragmon:join:deadlines:acme", "ragmon:join:due")
    join = FeedbackJoin(redis_client, join_ttl_s=600, park_s=10)
    swept = join.claim_expired(now=T0 + 11)
    assert sorted(p.event_id for _, p in swept) == ["acme-fb0", "acme-fb1", "acme-fb2"]
    assert not redis_client.exists("ragmon:join:deadlines") and join.claim_expired(now=T0 + 11) == []
