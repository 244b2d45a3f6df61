"""The drift processor over a real Redis: windows, scheduling, model changes, replicas."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import redis
from prometheus_client import CollectorRegistry

from tests.workers.drift.drift_support import T0, app_config, build_processor, make_event, value
from workers.drift.processor import DriftProcessor

A = {"tenant": "acme", "signal": "app", "intent": "all", "model": "emb-a"}


def feed(
    proc: DriftProcessor, vectors: np.ndarray, model: str = "emb-a", start: float = T0, **kw: object
) -> None:
    events = [
        make_event(embedding=v, model=model, received_at=start + i, **kw) for i, v in enumerate(vectors)
    ]
    assert proc.process(events) == []


def gaussian(seed: int, rows: int, dim: int = 8, shift: float = 0.0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dim)) + shift


def test_no_value_before_the_windows_fill_then_one_test_per_k_queries(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    proc = build_processor(app_config(), redis_client, registry)
    feed(proc, gaussian(1, 20))
    feed(proc, gaussian(2, 9), start=T0 + 100)
    proc.tick(T0 + 200)
    assert value(registry, "ragmon_drift_mmd2", **A) is None
    assert value(registry, "ragmon_drift_window_size_queries", **A, window="reference") == 20
    assert value(registry, "ragmon_drift_window_size_queries", **A, window="current") == 9
    feed(proc, gaussian(3, 1), start=T0 + 150)  # the 10th current query: K reached
    proc.tick(T0 + 201)
    assert value(registry, "ragmon_drift_tests_total", **A) == 1
    p = value(registry, "ragmon_drift_p_value_ratio", **A)
    assert p is not None and 1 / 200 <= p <= 1
    assert value(registry, "ragmon_drift_mmd2", **A) is not None
    assert value(registry, "ragmon_drift_mmd2_threshold", **A) is not None
    assert value(registry, "ragmon_drift_detected", **A) == 0
    assert value(registry, "ragmon_drift_last_test_timestamp_seconds", **A) == T0 + 201
    proc.tick(T0 + 202)  # nothing new: no second test
    assert value(registry, "ragmon_drift_tests_total", **A) == 1


def test_t_seconds_trigger_a_test_when_anything_new_arrived(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    proc = build_processor(app_config(), redis_client, registry)
    feed(proc, gaussian(1, 30))
    proc.tick(T0 + 100)
    assert value(registry, "ragmon_drift_tests_total", **A) == 1
    feed(proc, gaussian(2, 1), start=T0 + 101)
    proc.tick(T0 + 120)  # 20 s < T = 30 s and 1 < K = 10
    assert value(registry, "ragmon_drift_tests_total", **A) == 1
    proc.tick(T0 + 131)
    assert value(registry, "ragmon_drift_tests_total", **A) == 2
    proc.tick(T0 + 200)  # T elapsed again but nothing new
    assert value(registry, "ragmon_drift_tests_total", **A) == 2


def test_a_shifted_current_window_is_flagged(redis_client: redis.Redis, registry: CollectorRegistry) -> None:
    proc = build_processor(app_config(), redis_client, registry)
    feed(proc, gaussian(1, 20))
    feed(proc, gaussian(2, 20, shift=2.0), start=T0 + 100)
    proc.tick(T0 + 200)
    assert value(registry, "ragmon_drift_detected", **A) == 1
    assert value(registry, "ragmon_drift_p_value_ratio", **A) == pytest.approx(1 / 200)
    mmd2 = value(registry, "ragmon_drift_mmd2", **A)
    threshold = value(registry, "ragmon_drift_mmd2_threshold", **A)
    assert mmd2 is not None and threshold is not None and mmd2 > threshold


def test_a_model_change_resets_the_reference_and_is_never_compared(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    proc = build_processor(app_config(test_every_seconds=10_000.0), redis_client, registry)
    feed(proc, gaussian(1, 30))
    proc.tick(T0 + 100)
    assert value(registry, "ragmon_drift_tests_total", **A) == 1
    # The app moves to emb-b (16 dims) while some emb-a traffic is still in flight.
    mixed = [
        make_event(embedding=v, model="emb-b", received_at=T0 + 200 + i)
        for i, v in enumerate(gaussian(4, 19, 16))
    ]
    mixed += [
        make_event(embedding=v, model="emb-a", received_at=T0 + 250 + i) for i, v in enumerate(gaussian(5, 3))
    ]
    assert proc.process(mixed) == []
    proc.tick(T0 + 300)
    resets = {"tenant": "acme", "signal": "app", "intent": "all", "from_model": "emb-a", "to_model": "emb-b"}
    assert value(registry, "ragmon_drift_model_resets_total", **resets) == 1
    b = {**A, "model": "emb-b"}
    assert value(registry, "ragmon_drift_window_size_queries", **b, window="reference") == 19
    assert value(registry, "ragmon_drift_mmd2", **b) is None  # reference not full: no value
    assert value(registry, "ragmon_drift_tests_total", **A) == 1  # emb-a's 3 new queries: no test yet
    feed(proc, gaussian(6, 11, 16), model="emb-b", start=T0 + 400)
    proc.tick(T0 + 500)
    assert value(registry, "ragmon_drift_tests_total", **b) == 1
    assert value(registry, "ragmon_drift_mmd2", **b) is not None
    # the same name with another dimension is another model too, exported under the same label
    feed(proc, gaussian(7, 2, 4), model="emb-b", start=T0 + 600)
    proc.tick(T0 + 601)
    again = {**resets, "from_model": "emb-b", "to_model": "emb-b"}
    assert value(registry, "ragmon_drift_model_resets_total", **again) == 1
    # the label set now belongs to the 4-dimensional stream only: its fresh windows, no old result
    assert value(registry, "ragmon_drift_window_size_queries", **b, window="reference") == 2
    assert value(registry, "ragmon_drift_mmd2", **b) is None


def test_unknown_models_get_no_windows_and_no_series_of_their_own(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    # Two unconfigured models used to share the label `other` and overwrite each other's gauges.
    proc = build_processor(app_config(), redis_client, registry)
    feed(proc, gaussian(1, 3), model="text-embedding-9000")
    feed(proc, gaussian(2, 4, 16), model="another-embedder", start=T0 + 10)
    proc.tick(T0 + 20)
    assert proc.store.signals() == []
    assert (
        value(registry, "ragmon_drift_embeddings_total", tenant="acme", signal="app", outcome="unknown_model")
        == 7
    )
    families = {m.name: m.samples for m in registry.collect()}
    assert families["ragmon_drift_window_size_queries"] == []


def test_replicas_sharing_redis_run_one_test_per_interval(redis_url: str, redis_client: redis.Redis) -> None:
    """Two processors tick at the same instants, in threads released together by a barrier."""
    config = app_config(test_every_queries=10_000, test_every_seconds=10.0)
    registries = [CollectorRegistry(), CollectorRegistry()]
    clients = [redis.Redis.from_url(redis_url) for _ in registries]
    procs = [build_processor(config, c, r) for c, r in zip(clients, registries, strict=True)]
    feed(procs[0], gaussian(1, 40))
    steps = 60
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            for t in range(steps):
                now = T0 + 1000 + t
                if t % 2 == index:  # new traffic keeps arriving, split between the replicas
                    feed(procs[index], gaussian(100 + t, 1), start=now)
                barrier.wait(timeout=10)
                procs[index].tick(now)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    for c in clients:
        c.close()
    assert not errors, errors
    tests = [value(r, "ragmon_drift_tests_total", **A) or 0.0 for r in registries]
    assert sum(tests) == steps // 10, tests  # t = 0, 10, ..., 50
    # and both replicas export the shared result, whoever ran it
    procs[0].tick(T0 + 1000 + steps + 5)
    procs[1].tick(T0 + 1000 + steps + 5)
    mmd2 = [value(r, "ragmon_drift_mmd2", **A) for r in registries]
    assert mmd2[0] is not None and mmd2[0] == mmd2[1]


def test_per_intent_windows_for_configured_intents_only(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    proc = build_processor(app_config(intents=["billing"]), redis_client, registry)
    feed(proc, gaussian(1, 4), intent="billing")
    feed(proc, gaussian(2, 3), intent="shipping", start=T0 + 50)
    proc.tick(T0 + 60)
    assert value(registry, "ragmon_drift_window_size_queries", **A, window="reference") == 7
    billing = {**A, "intent": "billing"}
    assert value(registry, "ragmon_drift_window_size_queries", **billing, window="reference") == 4
    assert (
        value(registry, "ragmon_drift_window_size_queries", **{**A, "intent": "shipping"}, window="reference")
        is None
    )


def test_a_signal_not_seen_for_a_while_is_retired(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    proc = build_processor(app_config(retire_after_s=600.0), redis_client, registry)
    feed(proc, gaussian(1, 30))
    proc.tick(T0 + 100)
    assert value(registry, "ragmon_drift_mmd2", **A) is not None
    proc.tick(T0 + 30 + 601)
    assert value(registry, "ragmon_drift_mmd2", **A) is None
    assert value(registry, "ragmon_drift_window_size_queries", **A, window="reference") is None
    assert proc.store.signals() == []


def test_a_frozen_reference_is_tested_against_live_traffic(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    proc = build_processor(app_config(), redis_client, registry)
    feed(proc, gaussian(1, 30))
    proc.tick(T0 + 100)
    key = proc.store.signals()[0][0]
    proc.store.freeze(key, gaussian(9, 50, shift=3.0).astype(np.float32), stamp=T0 + 110)
    proc.tick(T0 + 111)  # forced: no need to wait for K or T
    assert value(registry, "ragmon_drift_tests_total", **A) == 2
    assert value(registry, "ragmon_drift_detected", **A) == 1
    assert value(registry, "ragmon_drift_window_size_queries", **A, window="reference") == 50


def test_events_of_another_type_are_rejected(redis_client: redis.Redis, registry: CollectorRegistry) -> None:
    # Bodies arrive validated by the runtime's decode (tests/workers/runtime/test_units.py);
    # the processor only refuses a type it does not read.
    proc = build_processor(app_config(), redis_client, registry)
    # Feedback is read now (session signals, docs/reformulations.md): a release is not.
    release = make_event(event_type="release", body={"release": "v2"})
    good = make_event(embedding=[0.0] * 8, model="emb-a")
    rejections = proc.process([release, good])
    assert [(r.event, r.reason) for r in rejections] == [(release, "unexpected_event_type")]
    assert "DriftTrace" in rejections[0].detail and "'release'" in rejections[0].detail
    assert proc.store.statuses([proc.store.signals()[0][0]])[0].reference == 1


def test_sampling_is_decided_by_event_id(redis_client: redis.Redis, registry: CollectorRegistry) -> None:
    proc = build_processor(app_config(sample=0.5, reference_size=200), redis_client, registry)
    events = [
        make_event(embedding=v, model="emb-a", received_at=T0 + i) for i, v in enumerate(gaussian(1, 200))
    ]
    proc.process(events)
    kept = proc.store.statuses([proc.store.signals()[0][0]])[0].reference
    assert 70 <= kept <= 130
    proc.process(events)  # the same ids get the same decision: nothing new
    assert proc.store.statuses([proc.store.signals()[0][0]])[0].reference == kept


@pytest.mark.slow
def test_redis_down_fails_the_scheduled_tests_and_the_batch_alike(registry: CollectorRegistry) -> None:
    from service.local.embedded import start_redis

    server = start_redis()
    client = redis.Redis(port=server.port, socket_timeout=1, socket_connect_timeout=1)
    try:
        proc = build_processor(app_config(), client, registry)
        feed(proc, gaussian(1, 5))
    finally:
        server.stop()
    with pytest.raises(redis.exceptions.ConnectionError):  # an outage: the runtime retries tick (outage.py)
        proc.tick(T0 + 100)
    assert value(registry, "ragmon_drift_tick_errors_total", error="ConnectionError") == 1
    with pytest.raises(redis.exceptions.ConnectionError):  # an outage: the runtime retries the batch
        proc.process([make_event(embedding=[0.0] * 8, model="emb-a")])
    client.close()


@pytest.mark.filterwarnings(
    "ignore::RuntimeWarning"
)  # as in production: numpy's overflow warnings are no errors
def test_embeddings_beyond_float32_never_reach_a_window_and_never_stall_the_tick(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    """A component of 1e39 is a finite number by the contract but inf as float32: in a reference window it
    made the bandwidth NaN and mmd_test raise in tick(), for every tenant's signals (a failing tick is an
    outage: the worker consumed nothing). Such embeddings are counted and left out; the rest are tested."""
    proc = build_processor(app_config(), redis_client, registry)
    hostile = gaussian(1, 30)
    hostile[::3, 0] = 1e39  # beyond float32: inf once stored
    hostile[1::3, 1] = 3e19  # finite as float32, but its squared norm is not
    feed(proc, hostile, tenant="mallory")
    feed(proc, gaussian(2, 30), tenant="acme", start=T0 + 50)
    proc.tick(T0 + 100)  # raised ValueError: sigma must be positive, got nan
    victim = {**A, "tenant": "acme"}
    assert value(registry, "ragmon_drift_tests_total", **victim) == 1
    bad = {"tenant": "mallory", "signal": "app"}
    assert value(registry, "ragmon_drift_embeddings_total", **bad, outcome="not_finite") == 20
    mallory = {**A, "tenant": "mallory"}
    assert value(registry, "ragmon_drift_window_size_queries", **mallory, window="reference") == 10
    assert value(registry, "ragmon_drift_tests_total", **mallory) is None  # 10 of 20: not full yet


def test_windows_stored_with_non_finite_rows_are_read_without_them(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    """Rows an earlier version stored (inf as float32) are dropped when a window is read."""
    proc = build_processor(app_config(), redis_client, registry)
    feed(proc, gaussian(1, 30))
    sig = next(s for s, _ in proc.store.signals())
    ids = redis_client.zrange(proc.store.key(sig, "ref"), 0, 4)
    poisoned = np.full(sig.dim, np.inf, dtype="<f4").tobytes()
    redis_client.hset(proc.store.key(sig, "vec"), mapping=dict.fromkeys(ids, poisoned))
    reference, current = proc.store.read(sig)
    assert len(reference) == 15 and np.isfinite(reference).all()
    proc.tick(T0 + 100)
    assert value(registry, "ragmon_drift_tests_total", **A) == 1


def test_a_tenant_cycling_dimensions_holds_a_few_signals_not_one_per_dimension(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    """Each dimension of a configured model is a signal with windows of its own, kept until it retires (an
    hour by default): a tenant sending a new dimension per batch held up to 4,096 signals per stream, each
    walked by every tick. Now a stream keeps its `max_signals_per_stream` most recent; a newer one retires
    the least recently seen, windows and all."""
    proc = build_processor(app_config(max_signals_per_stream=2), redis_client, registry)
    for i, dim in enumerate(range(2, 42)):
        feed(proc, gaussian(i, 3, dim), tenant="mallory", start=T0 + i)
    feed(proc, gaussian(99, 30), tenant="acme", start=T0 + 50)
    signals = [s for s, _ in proc.store.signals()]
    assert sorted(s.dim for s in signals if s.tenant == "mallory") == [40, 41]
    assert [s.dim for s in signals if s.tenant == "acme"] == [8]
    prefix = f"{proc.config.key_prefix}:"
    windows = {k.decode() for k in redis_client.scan_iter(f"{prefix}*mallory*:vec")}
    assert len(windows) == 2, sorted(windows)
    proc.tick(T0 + 100)
    assert value(registry, "ragmon_drift_tests_total", **A) == 1
    mallory = {**A, "tenant": "mallory"}
    assert value(registry, "ragmon_drift_window_size_queries", **mallory, window="reference") == 3
