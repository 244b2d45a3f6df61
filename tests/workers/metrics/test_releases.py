"""Release labels: recent releases shared by replicas through Redis, and a bounded releases hash."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import redis
from prometheus_client import CollectorRegistry

from tests.support.kafka import stored, trace_body
from tests.workers.metrics.test_processor import as_event, val
from workers.metrics.config import MetricsConfig
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor
from workers.metrics.releases import CURRENT_KEY, RECENT_KEY, RecentReleases

T0 = 1_800_000_000.0


def test_replicas_agree_on_the_capped_releases(redis_client: redis.Redis) -> None:
    a = RecentReleases(redis_client, limit=2, window_s=3600, refresh_s=5)
    b = RecentReleases(redis_client, limit=2, window_s=3600, refresh_s=5)
    assert [a.label("acme", r, T0) for r in ("v1", "v2", "v3")] == ["v1", "v2", "other"]
    assert [b.label("acme", r, T0 + 1) for r in ("v3", "v2", "v1")] == ["other", "v2", "v1"]
    assert b.label("globex", "v3", T0 + 1) == "v3"  # the cap is per tenant


def test_new_releases_get_labels_once_old_ones_stop_appearing(redis_client: redis.Redis) -> None:
    # The first-20 cap labelled every later release `other` for the life of the process.
    recent = RecentReleases(redis_client, limit=2, window_s=600, refresh_s=5)
    assert [recent.label("acme", r, T0) for r in ("v1", "v2")] == ["v1", "v2"]
    assert recent.label("acme", "v2", T0 + 400) == "v2"  # still in use: its last sighting moves
    assert recent.label("acme", "v3", T0 + 400) == "other"
    assert recent.label("acme", "v3", T0 + 700) == "v3"  # v1 unseen for 700 s > window: it aged out
    assert recent.label("acme", "v2", T0 + 700) == "v2"
    assert redis_client.zrange(RECENT_KEY + "acme", 0, -1) == [b"v2", b"v3"]
    assert 0 < redis_client.ttl(RECENT_KEY + "acme") <= 660


def test_a_decision_is_cached_for_the_refresh_interval(redis_client: redis.Redis) -> None:
    recent = RecentReleases(redis_client, limit=1, window_s=600, refresh_s=5)
    assert recent.label("acme", "v1", T0) == "v1"
    redis_client.delete(RECENT_KEY + "acme")
    other = RecentReleases(redis_client, limit=1, window_s=600, refresh_s=5)
    assert other.label("acme", "v2", T0) == "v2"
    assert recent.label("acme", "v1", T0 + 4) == "v1"  # cached, no round trip
    assert recent.label("acme", "v1", T0 + 6) == "other"  # re-asked: v2 holds the only slot


def test_a_release_marker_is_always_admitted(redis_client: redis.Redis) -> None:
    recent = RecentReleases(redis_client, limit=2, window_s=600, refresh_s=5)
    recent.label("acme", "junk-1", T0)
    recent.label("acme", "junk-2", T0 + 1)
    recent.announce("acme", "v9", T0 + 2)
    assert redis_client.zrange(RECENT_KEY + "acme", 0, -1) == [b"junk-2", b"v9"]  # the oldest went
    other = RecentReleases(redis_client, limit=2, window_s=600, refresh_s=5)
    assert other.label("acme", "v9", T0 + 3) == "v9"


def test_feedback_is_labelled_with_the_shared_decision(redis_client: redis.Redis) -> None:
    clock = [T0]
    config = MetricsConfig(max_releases_per_tenant=1, release_window_s=600)
    replicas = [
        (MetricsProcessor(config, MetricsWorkerMetrics(r), redis_client, clock=lambda: clock[0]), r)
        for r in (CollectorRegistry(), CollectorRegistry())
    ]
    (first, reg1), (second, reg2) = replicas
    first.process([as_event(stored("trace", trace_body(1, release="v1")))])
    second.process([as_event(stored("trace", trace_body(2, release="v2")))])
    for proc, n in ((first, 1), (second, 2)):
        proc.process(
            [as_event(stored("feedback", {"trace_id": f"trace-{n}", "kind": "copy", "value": True}))]
        )
    labels = {
        "tenant": "acme",
        "variant": "production",
        "intent": "billing",
        "kind": "copy",
        "reason": "none",
    }
    assert val(reg1, "ragmon_feedback_total", release="v1", **labels) == 1
    assert val(reg2, "ragmon_feedback_total", release="other", **labels) == 1
    clock[0] = T0 + 700  # v1 aged out of the window: v2 gets its own label on any replica
    first.process([as_event(stored("trace", trace_body(3, release="v2")))])
    first.process([as_event(stored("feedback", {"trace_id": "trace-3", "kind": "copy", "value": True}))])
    assert val(reg1, "ragmon_feedback_total", release="v2", **labels) == 1


def test_release_markers_are_capped_per_tenant_and_the_hash_is_trimmed(redis_client: redis.Redis) -> None:
    registry = CollectorRegistry()
    proc = MetricsProcessor(
        MetricsConfig(max_variants_per_tenant=2), MetricsWorkerMetrics(registry), redis_client
    )
    now = datetime.now(UTC)
    markers = [("production", "p1", 40), ("cand-a", "a1", 30), ("cand-b", "b1", 20), ("cand-c", "c1", 10)]
    proc.process(
        [
            as_event(stored("release", {"release": rel, "variant": variant}, when=now - timedelta(minutes=m)))
            for variant, rel, m in markers
        ]
    )
    proc.tick(now.timestamp())
    fields = sorted(f.decode().split("\x1f")[1] for f in redis_client.hkeys(CURRENT_KEY))
    assert fields == ["cand-a", "cand-b", "production"]  # cand-c is over the variant cap: never stored
    info = {
        s.labels["variant"] for m in registry.collect() if m.name == "ragmon_release_info" for s in m.samples
    }
    assert info == {"production", "cand-a", "cand-b"}
    # a replica that trims with a smaller cap keeps production and the newest other variant
    small = MetricsProcessor(
        MetricsConfig(max_variants_per_tenant=1), MetricsWorkerMetrics(CollectorRegistry()), redis_client
    )
    small.tick(now.timestamp())
    fields = sorted(f.decode().split("\x1f")[1] for f in redis_client.hkeys(CURRENT_KEY))
    assert fields == ["cand-b", "production"]
    proc.tick(now.timestamp() + 10)  # at its next refresh the first replica drops the trimmed series too
    info = {
        s.labels["variant"] for m in registry.collect() if m.name == "ragmon_release_info" for s in m.samples
    }
    assert info == {"production", "cand-b"}
