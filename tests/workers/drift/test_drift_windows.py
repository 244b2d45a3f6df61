"""The Redis windows on a real redis-server: capture, rolling, idempotency, leases."""

from __future__ import annotations

import time

import numpy as np
import pytest
import redis

from workers.drift.signals import APP, SignalKey
from workers.drift.windows import Observation, WindowStore

KEY = SignalKey("acme", APP, "all", "emb-a", 4)


def obs(i: int, key: SignalKey = KEY, at: float | None = None) -> Observation:
    vector = np.full(key.dim, float(i), dtype=np.float32)
    return Observation(key, f"e{i}", 1000.0 + i if at is None else at, vector)


@pytest.fixture
def store(redis_client: redis.Redis) -> WindowStore:
    return WindowStore(redis_client, "test:drift", reference_size=5, current_size=4)


def test_first_n_fill_the_reference_then_the_current_window_keeps_the_last_n(store: WindowStore) -> None:
    outcomes, changes = store.add([obs(i) for i in range(12)])
    assert outcomes == ["reference"] * 5 + ["current"] * 7
    assert changes == []  # the first model of a stream is not a change
    reference, current = store.read(KEY)
    assert reference[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert current[:, 0].tolist() == [8, 9, 10, 11]
    status = store.statuses([KEY])[0]
    assert (status.reference, status.current, status.pending) == (5, 4, 7)
    # trimmed rows leave no vectors behind
    assert store.redis.hlen(store.key(KEY, "vec")) == 9


def test_redelivered_events_change_nothing(store: WindowStore) -> None:
    store.add([obs(i) for i in range(8)])
    before = store.statuses([KEY])[0]
    outcomes, _ = store.add([obs(i) for i in range(8)])
    assert outcomes == ["duplicate"] * 8
    assert store.statuses([KEY])[0] == before


def test_an_event_older_than_the_window_does_not_count_as_new(store: WindowStore) -> None:
    store.add([obs(i) for i in range(10)])
    outcomes, _ = store.add([obs(99, at=1.0)])  # rolled out immediately: the oldest in a full window
    assert outcomes == ["too_old"]
    assert store.statuses([KEY])[0].pending == 5


def test_age_bound_trims_the_current_window_and_its_vectors(store: WindowStore) -> None:
    store.add([obs(i) for i in range(9)])  # current: 5..8 received at 1005..1008
    assert store.trim_current(KEY, cutoff=1007.0) == 2
    _, current = store.read(KEY)
    assert current[:, 0].tolist() == [7, 8]
    assert store.redis.hlen(store.key(KEY, "vec")) == 7


def test_a_new_model_in_a_stream_is_reported_with_the_one_it_replaces(store: WindowStore) -> None:
    other = SignalKey("acme", APP, "all", "emb-b", 8)
    store.add([obs(i) for i in range(3)])
    _, changes = store.add([obs(i + 100, key=other, at=2000.0 + i) for i in range(3)])
    assert [(c.previous, c.key) for c in changes] == [(KEY, other)]
    _, again = store.add([obs(7, at=2100.0), obs(200, key=other, at=2101.0)])
    assert again == []  # both models are known now: no second report
    # the windows never mix: each model has its own reference
    assert store.read(other)[0].shape == (4, 8)
    assert store.read(KEY)[0].shape == (4, 4)


def test_another_tenant_or_intent_is_another_stream(store: WindowStore) -> None:
    store.add([obs(0)])
    _, changes = store.add(
        [
            obs(1, key=SignalKey("globex", APP, "all", "emb-b", 8)),
            obs(2, key=SignalKey("acme", APP, "billing", "emb-b", 8)),
        ]
    )
    assert changes == []


def test_a_frozen_reference_replaces_the_captured_one(store: WindowStore) -> None:
    store.add([obs(i) for i in range(7)])
    frozen = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert store.freeze(KEY, frozen, stamp=5000.0) == 3
    reference, current = store.read(KEY)
    np.testing.assert_array_equal(reference, frozen)
    assert current[:, 0].tolist() == [5, 6]
    status = store.statuses([KEY])[0]
    assert status.frozen and status.forced
    outcomes, _ = store.add([obs(50)])
    assert outcomes == ["current"]  # a frozen reference does not fill from traffic
    with pytest.raises(ValueError, match=r"shape \(n, 4\)"):
        store.freeze(KEY, np.zeros((3, 5), dtype=np.float32), stamp=1.0)


def test_reset_starts_a_new_reference_from_the_next_queries(store: WindowStore) -> None:
    store.add([obs(i) for i in range(9)])
    store.reset(KEY)
    outcomes, _ = store.add([obs(i) for i in range(20, 26)])
    assert outcomes == ["reference"] * 5 + ["current"]


def test_only_one_holder_of_a_lease(store: WindowStore) -> None:
    token = store.acquire_lease(KEY, lease_s=30)
    assert token is not None
    assert store.acquire_lease(KEY, lease_s=30) is None
    store.release_lease(KEY, "not-the-holder")
    assert store.acquire_lease(KEY, lease_s=30) is None
    store.release_lease(KEY, token)
    assert store.acquire_lease(KEY, lease_s=30) is not None


def test_a_lease_expires_when_its_holder_dies(store: WindowStore) -> None:
    assert store.acquire_lease(KEY, lease_s=0.05) is not None
    assert store.acquire_lease(KEY, lease_s=30) is None
    time.sleep(0.1)
    assert store.acquire_lease(KEY, lease_s=30) is not None


def test_retire_drops_the_signal_once(store: WindowStore) -> None:
    store.add([obs(i) for i in range(8)])
    assert [k for k, _ in store.signals()] == [KEY]
    assert store.retire(KEY) is True
    assert store.retire(KEY) is False
    assert store.signals() == []
    assert not store.redis.exists(store.key(KEY, "ref"), store.key(KEY, "cur"), store.key(KEY, "vec"))
