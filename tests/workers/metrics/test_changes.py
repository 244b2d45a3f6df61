"""Component changes detected in traces (workers/metrics/changes.py) by two replicas sharing a real Redis,
and declared ones, exported as the latest change per tenant and component."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.simulate import generate_events, load_scenario
from tests.support.decoded import decoded_event
from tests.support.kafka import stored, trace_body
from workers.metrics.changes import MARKERS_KEY, WINDOW_KEY
from workers.metrics.config import MetricsConfig
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor
from workers.metrics.views import VIEWS
from workers.runtime.types import Event

CHANGE = "ragmon_release_component_change_timestamp_seconds"
_ids = itertools.count()


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def traced(
    gen: str = "gen-a", emb: str = "emb-v1", index: str = "idx-1", variant: str = "production"
) -> Event:
    i = next(_ids)
    body = trace_body(
        i,
        variant=variant,
        query={"text": f"q{i}", "embedding_model": emb},
        retrieval={
            "documents": [{"id": f"d{i}", "text": "c"}],
            "index_embedding_model": emb,
            "index_version": index,
        },
        usage={"model": gen, "tokens": {"prompt": 10}},
    )
    return decoded_event(stored("trace", body), VIEWS, topic="t")


@pytest.fixture
def replicas(redis_client: redis.Redis) -> tuple[list[MetricsProcessor], list[CollectorRegistry], Clock]:
    clock = Clock()
    config = MetricsConfig(change_min_traces=20, change_window_s=60)
    regs = [CollectorRegistry(), CollectorRegistry()]
    procs = [MetricsProcessor(config, MetricsWorkerMetrics(r), redis_client, clock=clock) for r in regs]
    return procs, regs, clock


def traffic(
    replicas: tuple[list[MetricsProcessor], list[CollectorRegistry], Clock],
    minutes: int,
    mix: dict[str, float],
    field: str = "gen",
    per_minute: int = 20,
) -> None:
    """`per_minute` traces a minute, split over values by `mix`, in batches alternating between replicas."""
    procs, _, clock = replicas
    for _ in range(minutes):
        batch: list[Event] = []
        for value, share in mix.items():
            batch += [traced(**{field: value}) for _ in range(round(per_minute * share))]
        for half, proc in zip((batch[::2], batch[1::2]), procs, strict=True):
            proc.process(half)
        clock.now += 60
        for proc in procs:
            proc.tick(clock.now)


def detected(regs: list[CollectorRegistry], component: str = "generator_model") -> float:
    return sum(
        r.get_sample_value(
            "ragmon_release_detected_changes_total", {"tenant": "acme", "component": component}
        )
        or 0.0
        for r in regs
    )


def series(reg: CollectorRegistry, component: str = "generator_model") -> list[dict[str, str]]:
    return [
        s.labels
        for metric in reg.collect()
        if metric.name == CHANGE
        for s in metric.samples
        if s.labels["component"] == component
    ]


def test_a_new_model_taking_the_traffic_is_recorded_once_across_replicas(replicas: Any) -> None:
    _, regs, _ = replicas
    traffic(replicas, 5, {"gen-a": 1.0})  # established, no change (nothing to change from)
    assert detected(regs) == 0 and series(regs[0]) == []
    traffic(replicas, 10, {"gen-b": 1.0})
    assert detected(regs) == 1  # one replica closed the deciding window; the other saw no change
    for reg in regs:  # both export the same latest change
        (labels,) = series(reg)
        assert labels == {
            "tenant": "acme",
            "component": "generator_model",
            "from": "gen-a",
            "to": "gen-b",
            "source": "detected",
        }
    assert series(regs[0], "embedding_model") == []  # the embedding model did not change


def test_a_canary_at_ten_percent_or_an_even_split_records_nothing(replicas: Any) -> None:
    _, regs, _ = replicas
    traffic(replicas, 5, {"gen-a": 1.0})
    traffic(replicas, 30, {"gen-a": 0.9, "gen-b": 0.1})
    traffic(replicas, 30, {"gen-a": 0.5, "gen-b": 0.5})  # neither above 60%: hysteresis holds gen-a
    assert detected(regs) == 0 and series(regs[0]) == []
    traffic(replicas, 10, {"gen-a": 0.2, "gen-b": 0.8})  # now the old one is below 40%
    assert detected(regs) == 1


def test_only_the_latest_change_per_component_is_exported(replicas: Any) -> None:
    _, regs, _ = replicas
    traffic(replicas, 5, {"emb-v1": 1.0}, field="emb")
    traffic(replicas, 5, {"emb-v2": 1.0}, field="emb")
    traffic(replicas, 5, {"emb-v3": 1.0}, field="emb")
    assert detected(regs, "embedding_model") == 2
    (labels,) = series(regs[0], "embedding_model")  # the v1 -> v2 series left /metrics
    assert (labels["from"], labels["to"]) == ("emb-v2", "emb-v3")


def test_a_rebuilt_index_is_a_change_of_the_index_alone(replicas: Any) -> None:
    _, regs, _ = replicas
    traffic(replicas, 5, {"idx-1": 1.0}, field="index")
    traffic(replicas, 5, {"idx-1": 0.3, "idx-2": 0.7}, field="index")  # old share 30% < 40%, new 70% > 60%
    assert detected(regs, "index") == 1
    (labels,) = series(regs[0], "index")
    assert (labels["from"], labels["to"], labels["source"]) == ("idx-1", "idx-2", "detected")
    assert detected(regs, "embedding_model") == 0 and detected(regs, "generator_model") == 0


def test_garbage_model_names_grow_no_state_and_no_series(replicas: Any, redis_client: redis.Redis) -> None:
    procs, regs, clock = replicas
    traffic(replicas, 5, {"gen-a": 1.0})
    for minute in range(10):  # every trace a new name: none ever holds a majority
        procs[minute % 2].process([traced(gen=f"junk-{minute}-{i}") for i in range(40)])
        clock.now += 60
    window = redis_client.hgetall(WINDOW_KEY + "acme\x1fgenerator_model")
    assert len([f for f in window if f.startswith(b"c:")]) <= 8 + 1  # the cap, and `other`
    procs[0].tick(clock.now)
    assert detected(regs) == 0 and series(regs[0]) == []


def test_candidate_traffic_is_not_the_tenants_model(replicas: Any) -> None:
    procs, regs, clock = replicas
    traffic(replicas, 5, {"gen-a": 1.0})
    for _ in range(10):
        procs[0].process([traced(gen="gen-cand", variant="cand-a") for _ in range(40)])
        clock.now += 60
    assert detected(regs) == 0


def test_a_declared_change_is_kept_when_the_traffic_confirms_it(
    replicas: Any, redis_client: redis.Redis
) -> None:
    procs, regs, clock = replicas
    traffic(replicas, 5, {"emb-v1": 1.0}, field="emb")
    body = {"release": "emb-migration", "component": "embedding_model", "from": "emb-v1", "to": "emb-v2"}
    procs[0].process([decoded_event(stored("release", body), VIEWS, topic="t")])
    traffic(replicas, 5, {"emb-v2": 1.0}, field="emb")
    assert detected(regs, "embedding_model") == 0  # the declared marker already says so
    (labels,) = series(regs[1], "embedding_model")
    assert (labels["from"], labels["to"], labels["source"]) == ("emb-v1", "emb-v2", "declared")
    assert len(redis_client.hgetall(MARKERS_KEY)) == 1


# -- simulated incidents (service/simulate: embedding_model_change, generation_model_change) ---------------

SIM_START = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def test_simulated_model_changes_are_recorded_once_and_a_canary_not_at_all(
    redis_client: redis.Redis,
) -> None:
    clock = Clock()
    config = MetricsConfig(change_min_traces=60, change_window_s=120)
    regs = [CollectorRegistry(), CollectorRegistry()]
    procs = [MetricsProcessor(config, MetricsWorkerMetrics(r), redis_client, clock=clock) for r in regs]
    releases: list[dict[str, Any]] = []
    batch: list[Event] = []
    for n, sim in enumerate(generate_events(load_scenario("markers"), SIM_START)):
        if sim.type not in ("trace", "release"):
            continue
        if sim.type == "release":
            releases.append(sim.body)
        when = SIM_START + timedelta(seconds=sim.at_s)
        batch.append(
            decoded_event(stored(sim.type, sim.body, tenant=sim.tenant, when=when), VIEWS, topic="t")
        )
        if len(batch) == 25:
            clock.now = when.timestamp()
            procs[n % 2].process(batch)
            batch = []
    procs[0].process(batch)
    procs[0].tick(clock.now)
    declared = [r for r in releases if r.get("component") == "embedding_model"]
    assert declared == [
        {"release": "v2", "variant": "production", "description": "deploy v2", "component": "embedding_model",
         "from": "app-embed-v1", "to": "app-embed-v2"}
    ]  # fmt: skip

    def count(tenant: str, component: str) -> float:
        key = {"tenant": tenant, "component": component}
        return sum(r.get_sample_value("ragmon_release_detected_changes_total", key) or 0.0 for r in regs)

    def latest(tenant: str, component: str) -> tuple[str, str, str] | None:
        found = [
            (s.labels["from"], s.labels["to"], s.labels["source"])
            for metric in regs[0].collect()
            if metric.name == CHANGE
            for s in metric.samples
            if s.labels["tenant"] == tenant and s.labels["component"] == component
        ]
        assert len(found) <= 1, found
        return found[0] if found else None

    assert count("globex", "embedding_model") == 1
    assert latest("globex", "embedding_model") == ("app-embed-v1", "app-embed-v2", "detected")
    assert count("globex", "generator_model") == 1
    assert latest("globex", "generator_model") == ("gpt-4o-mini", "provider-gen-v2", "detected")
    assert count("acme", "embedding_model") == 0  # the declared marker stands for it
    assert latest("acme", "embedding_model") == ("app-embed-v1", "app-embed-v2", "declared")
    assert count("acme", "generator_model") == 0 and latest("acme", "generator_model") is None  # the canary
