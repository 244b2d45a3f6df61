"""The shadow processor on a real Redis: pairing in any order, duplicates, TTL, recompute, metrics."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
import redis
from prometheus_client import CollectorRegistry
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support.records import FakeRecord
from tests.workers.shadow.shadow_events import score_event, trace_body, trace_event
from workers.runtime.decode import RecordDecoder, Undecodable
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import Event
from workers.shadow.config import ShadowConfig
from workers.shadow.live import live_comparison
from workers.shadow.metrics import ShadowMetrics
from workers.shadow.processor import ShadowProcessor
from workers.shadow.store import ShadowStore
from workers.shadow.views import ShadowTrace


@pytest.fixture
def config() -> ShadowConfig:
    return ShadowConfig(
        pair_wait_s=2,
        recompute_every_pairs=10,
        recompute_every_s=3600,
        min_pairs=5,
        resamples=500,
        slice_fields={"locale": ["pt", "en"]},
        expected_shadow_rate={"cand-a": 1.0},
    )


def _processor(client: redis.Redis, config: ShadowConfig) -> tuple[ShadowProcessor, CollectorRegistry]:
    registry = CollectorRegistry()
    return ShadowProcessor(config, ShadowStore(client, config), ShadowMetrics(registry)), registry


def test_pairs_whichever_twin_arrives_first(redis_client: redis.Redis, config: ShadowConfig) -> None:
    proc, registry = _processor(redis_client, config)
    proc.process([trace_event(trace_body("r1", "cand-a"))])  # candidate before production
    proc.process([trace_event(trace_body("r1")), trace_event(trace_body("r2"))])
    proc.process([trace_event(trace_body("r2", "cand-a"))])
    counts = proc.store.counts("acme")
    assert counts.paired == {"cand-a": 2}
    assert counts.seen == {"production": 2, "cand-a": 2}
    assert registry.get_sample_value("ragmon_shadow_pairs_formed_total", {"tenant": "acme"}) == 2.0


def test_duplicates_and_redelivery_count_once(redis_client: redis.Redis, config: ShadowConfig) -> None:
    proc, registry = _processor(redis_client, config)
    prod, cand = trace_event(trace_body("r1")), trace_event(trace_body("r1", "cand-a"))
    for _ in range(3):
        proc.process([prod, cand, score_event("r1", "production", 0.9), score_event("r1", "cand-a", 0.4)])
    # a different event id for the same request and variant (the app resent it) is not a second pair either
    proc.process([trace_event(trace_body("r1", "cand-a"))])
    counts = proc.store.counts("acme")
    assert counts.paired == {"cand-a": 1} and counts.seen == {"production": 1, "cand-a": 1}
    assert registry.get_sample_value("ragmon_shadow_events_total", {"tenant": "acme", "kind": "trace"}) == 2.0
    assert (
        registry.get_sample_value("ragmon_shadow_events_total", {"tenant": "acme", "kind": "faithfulness"})
        == 2.0
    )


def test_a_twin_after_the_wait_stays_unpaired(redis_client: redis.Redis, config: ShadowConfig) -> None:
    proc, _ = _processor(redis_client, config.model_copy(update={"pair_wait_s": 1}))
    proc.process([trace_event(trace_body("late"))])
    time.sleep(1.3)
    proc.process([trace_event(trace_body("late", "cand-a"))])
    counts = proc.store.counts("acme")
    assert counts.paired.get("cand-a", 0) == 0
    assert counts.seen == {"production": 1, "cand-a": 1}  # both counted, as unpaired


def test_scores_after_pairing_reach_the_comparison(redis_client: redis.Redis, config: ShadowConfig) -> None:
    proc, _ = _processor(redis_client, config)
    events = []
    for i in range(40):
        rid = f"r{i}"
        events += [trace_event(trace_body(rid)), trace_event(trace_body(rid, "cand-a", total_ms=1200.0))]
    proc.process(events)
    proc.process(
        [
            score_event(f"r{i}", v, 0.9 if v == "production" else 0.3)
            for i in range(40)
            for v in ("production", "cand-a")
        ]
    )
    comparison, pairs = live_comparison(proc.store, config, "acme", "cand-a")
    by = {r.metric: r for r in comparison.metrics}
    assert pairs == 40
    assert by["faithful"].losses == 40 and by["faithful"].verdict == "worse"
    assert by["latency_total_seconds"].verdict == "worse"
    assert by["latency_total_seconds"].delta == pytest.approx(0.4)
    assert {(s.dimension, s.value) for s in comparison.slices} == {("intent", "billing"), ("locale", "pt")}
    assert comparison.context["coverage.coverage"] == 1.0


def test_recompute_under_lease_and_exported_by_every_replica(
    redis_client: redis.Redis, config: ShadowConfig
) -> None:
    first, reg1 = _processor(redis_client, config)
    second, reg2 = _processor(redis.Redis.from_url(_url(redis_client)), config)
    first.process(
        [
            trace_event(trace_body(f"r{i}", v, cited=(v == "production" or i % 2 == 0)))
            for i in range(12)
            for v in ("production", "cand-a")
        ]
    )
    token = first.store.acquire_lease("acme", "cand-a")  # another replica is computing: nobody else may
    assert token is not None
    assert not second.recompute_if_leased("acme", "cand-a", time.time())
    first.store.release_lease("acme", "cand-a", token)
    second.tick(time.time())  # 12 pending >= 10: due
    assert first.store.counts("acme").pending == {"cand-a": 0}
    first.tick(time.time())  # not due any more; exports what the other replica stored
    for reg in (reg1, reg2):
        labels = {"tenant": "acme", "candidate": "cand-a", "metric": "uncited_answer", "slice": "all"}
        assert reg.get_sample_value("ragmon_shadow_losses", labels) == 6.0
        assert (
            reg.get_sample_value("ragmon_shadow_window_pairs", {"tenant": "acme", "candidate": "cand-a"})
            == 12
        )
        assert (
            reg.get_sample_value(
                "ragmon_shadow_verdict",
                {
                    "tenant": "acme",
                    "candidate": "cand-a",
                    "metric": "uncited_answer",
                    "verdict": "not_enough_data",
                },
            )
            == 1.0
        )


def test_candidates_per_tenant_are_capped(redis_client: redis.Redis, config: ShadowConfig) -> None:
    proc, registry = _processor(redis_client, config.model_copy(update={"max_candidates_per_tenant": 2}))
    proc.process([trace_event(trace_body("r1", f"cand-{i}")) for i in range(4)])
    assert len(proc.store.candidates()) == 2
    assert registry.get_sample_value("ragmon_shadow_candidates_refused_total", {"tenant": "acme"}) == 2.0


def test_production_latency_before_and_during_a_candidate(
    redis_client: redis.Redis, config: ShadowConfig
) -> None:
    proc, _ = _processor(redis_client, config)
    proc.process([trace_event(trace_body(f"b{i}", total_ms=500.0)) for i in range(20)])
    proc.process([trace_event(trace_body("c0", "cand-a"))])
    proc.process([trace_event(trace_body(f"d{i}", total_ms=600.0)) for i in range(20)])
    before, during = proc.store.production_latencies("acme")
    assert (len(before), len(during)) == (20, 20)
    comparison, _ = live_comparison(proc.store, config, "acme", "cand-a")
    assert comparison.context["production_latency.p95_ratio"] == pytest.approx(1.2)


def _url(client: redis.Redis) -> str:
    kw = client.connection_pool.connection_kwargs
    return f"redis://{kw['host']}:{kw['port']}/{kw.get('db', 0)}"


def test_a_redis_outage_in_tick_is_counted_and_raised_like_a_batchs(config: ShadowConfig) -> None:
    # nothing listens on port 1; no client-side retries (the worker's outage handling is under test)
    dead = redis.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    proc, registry = _processor(dead, config)
    with pytest.raises(
        redis.exceptions.ConnectionError
    ):  # the runtime retries tick (workers/runtime/outage.py)
        proc.tick(time.time())
    assert registry.get_sample_value("ragmon_shadow_tick_errors_total", {"error": "ConnectionError"}) == 1.0
    with pytest.raises(redis.exceptions.ConnectionError):  # a batch raises: the runtime retries it
        proc.process([trace_event(trace_body("r1"))])


def _record(body: dict[str, object]) -> Any:
    now = datetime.now(UTC).isoformat()
    value = orjson.dumps(
        {
            "schema_version": 1,
            "id": str(uuid.uuid4()),
            "type": "trace",
            "tenant": "acme",
            "timestamp": now,
            "received_at": now,
            "body": body,
        }
    )
    return FakeRecord(value, [], topic="test.traces")


def test_the_runtime_decodes_traces_into_the_shadow_view_and_dead_letters_broken_ones() -> None:
    decoder = RecordDecoder(ShadowProcessor.views)
    ok = decoder.decode(_record(trace_body("r1", "cand-a")), "trace")
    assert isinstance(ok, Event) and isinstance(ok.body, ShadowTrace)
    assert (ok.body.request_id, ok.body.variant, ok.body.timings["total"]) == ("r1", "cand-a", 800.0)
    # a spelling the API's pydantic models accept (a number as a string) is read through the contract
    lax = trace_body("r2")
    lax["usage"]["cost_usd"] = "0.004"  # type: ignore[index]
    coerced = decoder.decode(_record(lax), "trace")
    assert isinstance(coerced, Event) and coerced.body.usage.cost_usd == 0.004
    for path, value, field in [
        (("request_id",), "has space", "record.body.request_id"),
        (("answer", "text"), "x" * 40_000, "record.body.answer.text"),
        (("timings",), {"total": -5.0}, "record.body.timings.total"),
        (("variant",), "Cand-A", "record.body.variant"),
    ]:
        body = trace_body("r3")
        node: Any = body
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
        dead = decoder.decode(_record(body), "trace")
        assert isinstance(dead, Undecodable), path
        assert dead.reason == DeadLetterReason.INVALID_BODY and dead.detail.startswith(field), dead.detail


def _candidate_series(registry: CollectorRegistry) -> set[str]:
    return {s.labels["candidate"] for f in registry.collect() for s in f.samples if "candidate" in s.labels}


def test_a_candidate_not_seen_for_its_window_leaves_with_its_series_on_every_replica(
    redis_client: redis.Redis, config: ShadowConfig
) -> None:
    day = 86400.0
    now = [1_000_000.0]
    cfg = config.model_copy(
        update={"max_candidates_per_tenant": 2, "candidate_window_s": 3 * day, "recompute_every_pairs": 1}
    )
    store = ShadowStore(redis_client, cfg)
    (reg_a, reg_b) = CollectorRegistry(), CollectorRegistry()
    a = ShadowProcessor(cfg, store, ShadowMetrics(reg_a), clock=lambda: now[0])
    b = ShadowProcessor(cfg, store, ShadowMetrics(reg_b), clock=lambda: now[0])
    for i, cand in enumerate(["cand-a", "cand-b"]):
        a.process([trace_event(trace_body(f"r{i}")), trace_event(trace_body(f"r{i}", cand))])
    a.tick(now[0])
    b.tick(now[0])
    assert _candidate_series(reg_a) == _candidate_series(reg_b) == {"cand-a", "cand-b"}
    # at the cap a third is refused, as before the window
    a.process([trace_event(trace_body("r9", "cand-c"))])
    assert reg_a.get_sample_value("ragmon_shadow_candidates_refused_total", {"tenant": "acme"}) == 1.0
    # cand-b keeps running; cand-a sends nothing for longer than the window
    now[0] += 2 * day
    a.process([trace_event(trace_body("r10")), trace_event(trace_body("r10", "cand-b"))])
    now[0] += 2 * day
    a.tick(now[0])
    assert {c for _, c in store.candidates()} == {"cand-b"}
    assert reg_a.get_sample_value("ragmon_shadow_candidates_expired_total", {"tenant": "acme"}) == 1.0
    assert redis_client.exists(f"{store.prefix('acme')}pairs:cand-a") == 0
    assert redis_client.exists(f"{store.prefix('acme')}result:cand-a") == 0
    assert _candidate_series(reg_a) == {"cand-b"}
    b._next_publish = 0.0
    b.tick(now[0])  # the other replica's sweep finds nothing left to expire, its publish prunes cand-a
    assert _candidate_series(reg_b) == {"cand-b"}
    # the freed place takes a new candidate
    a.process([trace_event(trace_body("r11")), trace_event(trace_body("r11", "cand-c"))])
    assert {c for _, c in store.candidates()} == {"cand-b", "cand-c"}
    assert reg_a.get_sample_value("ragmon_shadow_candidates_refused_total", {"tenant": "acme"}) == 1.0


def test_candidates_recorded_before_the_window_existed_start_their_window_at_the_first_sweep(
    redis_client: redis.Redis, config: ShadowConfig
) -> None:
    proc, _ = _processor(redis_client, config.model_copy(update={"candidate_window_s": 100.0}))
    proc.process([trace_event(trace_body("r1", "cand-old"))])
    redis_client.delete(f"{proc.store.prefix('acme')}last")  # as state written by the previous version
    now = time.time() + 1000
    assert proc.store.expire_candidates(now) == []
    assert proc.store.expire_candidates(now + 101) == [("acme", "cand-old")]
