"""Stratum `drift`: the drift worker flags a window in Redis, the review sampler queues that tenant's
(or intent's) traces at the drift rate, with its own share and inclusion probability (real Redis, PostgreSQL)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from service.contracts import driftflags
from tests.workers.review.helpers import trace_event
from tests.workers.review.test_review_processor import items, val
from workers.drift.signals import APP, SignalKey
from workers.drift.windows import WindowStore

OUTCOME = {
    "mmd2": 0.1,
    "p_value": 0.001,
    "threshold": 0.05,
    "sigma": 1.0,
    "permutations": 100.0,
    "n_reference": 50.0,
    "n_current": 50.0,
}


def drift_test(client: redis.Redis, tenant: str, intent: str, drifted: bool, at: float | None = None) -> None:
    """What the drift worker stores after a test of one window (its own WindowStore, the default prefix)."""
    store = WindowStore(client, driftflags.DEFAULT_PREFIX, 10, 10)
    store.record_test(
        SignalKey(tenant, APP, intent, "emb-a", 4),
        {**OUTCOME, "drift": float(drifted)},
        time.time() if at is None else at,
        consumed=0,
    )


def test_traces_of_a_flagged_tenant_go_to_the_drift_stratum(
    make: Any, review_db_url: str, redis_client: redis.Redis
) -> None:
    drift_test(redis_client, "acme", driftflags.ALL_INTENTS, drifted=True)
    drift_test(redis_client, "calm", driftflags.ALL_INTENTS, drifted=False)
    proc, reg = make(drift_rate=0.5, capacity_per_day=10_000, drift_refresh_s=0)
    proc.process(
        [trace_event(i, sample_rate=0.5) for i in range(200)]
        + [trace_event(1000 + i, tenant="calm") for i in range(50)]
    )
    got = items(review_db_url)
    assert got and all(v[0] == "drift" and v[1] == "query_drift" for v in got.values())
    assert not any(t.startswith("trace-10") and len(t) == 10 for t in got)  # no trace of the calm tenant
    assert 70 < len(got) < 130  # about half of acme's 200 at drift_rate 0.5
    assert all(v[2] == pytest.approx(0.25) for v in got.values())  # drift rate x the app sample rate
    assert val(reg, "ragmon_review_queued_total", tenant="acme", stratum="drift") == len(got)
    assert val(reg, "ragmon_review_queued_total", tenant="calm", stratum="drift") == 0


def test_an_intent_window_flags_only_that_intent(
    make: Any, review_db_url: str, redis_client: redis.Redis
) -> None:
    drift_test(redis_client, "acme", "billing", drifted=True)
    proc, _ = make(drift_rate=1.0, drift_refresh_s=0)
    proc.process(
        [trace_event(1, intent="billing"), trace_event(2, intent="search"), trace_event(3, intent=None)]
    )
    assert {t: v[0] for t, v in items(review_db_url).items()} == {"trace-1": "drift"}


def test_a_cleared_or_stale_flag_stops_the_stratum(
    make: Any, review_db_url: str, redis_client: redis.Redis
) -> None:
    drift_test(redis_client, "acme", driftflags.ALL_INTENTS, drifted=True)
    proc, _ = make(drift_rate=1.0, drift_refresh_s=0, drift_flag_max_age_s=600)
    proc.process([trace_event(1)])
    drift_test(redis_client, "acme", driftflags.ALL_INTENTS, drifted=False)  # the next test finds none
    proc.process([trace_event(2)])
    drift_test(
        redis_client, "acme", driftflags.ALL_INTENTS, drifted=True, at=time.time() - 3600
    )  # a stale flag
    proc.process([trace_event(3)])
    assert set(items(review_db_url)) == {"trace-1"}


def test_drift_has_its_own_share_and_blind_wins(
    make: Any, review_db_url: str, redis_client: redis.Redis
) -> None:
    drift_test(redis_client, "acme", driftflags.ALL_INTENTS, drifted=True)
    proc, reg = make(
        drift_rate=1.0, drift_refresh_s=0, capacity_per_day=10, shares={"blind": 0.5, "drift": 0.3}
    )
    proc.process([trace_event(i) for i in range(8)])
    strata = [v[0] for v in items(review_db_url).values()]
    assert strata.count("drift") == 3
    assert val(reg, "ragmon_review_overflow_total", tenant="acme", stratum="drift") == 5
    both, _ = make(blind_rate=1.0, drift_rate=1.0, drift_refresh_s=0, capacity_per_day=100)
    both.process([trace_event(50)])
    assert items(review_db_url)["trace-50"][0] == "blind"  # one item per trace; the probability sample wins


def test_flags_are_read_once_per_refresh(make: Any, redis_client: redis.Redis, review_db_url: str) -> None:
    proc, _ = make(drift_rate=1.0, drift_refresh_s=3600)
    proc.process([trace_event(1)])  # read: nothing flagged
    drift_test(redis_client, "acme", driftflags.ALL_INTENTS, drifted=True)
    proc.process([trace_event(2)])  # not re-read within drift_refresh_s
    assert items(review_db_url) == {}
    assert driftflags.flagged_windows(redis_client, driftflags.DEFAULT_PREFIX, ["acme"], time.time(), 60) == {
        "acme": frozenset({driftflags.ALL_INTENTS})
    }
