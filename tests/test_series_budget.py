"""The series budget (docs/series-budget.md): every worker's processor driven in process over 30 simulated
days of weekly releases, intents and candidates coming and going, against a real Redis: the metrics worker
(MetricsScenario), then the exclusion, drift, shadow and faithfulness workers (WorkersScenario)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry

from tests.support.series import (
    MetricsScenario,
    WorkersScenario,
    other_workers,
    series_by_family,
    tiny_hhem_checkpoint,
)
from workers.metrics.config import MetricsConfig, ModelPrice
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor

# Series one tenant of the scenario may cost the metrics worker at the defaults (docs/series-budget.md).
BUDGET_PER_TENANT = 3200
# After the first week a tenant's series stay within this factor of its first week's peak (feedback
# kinds meeting intents and releases for the first time fill a few combinations; no release accumulates).
FLAT = 1.05
DAYS = 30
PRICES = {"gpt-x": ModelPrice(prompt=1.0, completion=2.0, cached_prompt=0.5)}


def run(
    client: redis.Redis, scenario: MetricsScenario, **config: float
) -> tuple[CollectorRegistry, list[dict[str, int]]]:
    registry = CollectorRegistry()
    proc = MetricsProcessor(
        MetricsConfig(prices=PRICES, **config), MetricsWorkerMetrics(registry), client, clock=scenario.clock
    )
    daily = []
    for day in range(DAYS + 1):
        scenario.run_day(proc, day)
        daily.append(
            {t: sum(series_by_family(registry, t).values()) for t in scenario.tenants + scenario.hostile}
        )
    return registry, daily


def test_a_tenants_series_stay_flat_after_the_first_week_and_within_the_budget(
    redis_client: redis.Redis,
) -> None:
    registry, daily = run(redis_client, MetricsScenario(["acme"]))
    series = [d["acme"] for d in daily]
    first_week = max(series[:8])
    assert max(series[8:]) <= FLAT * first_week, series
    assert max(series) <= BUDGET_PER_TENANT, series
    # A release or candidate that left the window is no longer exported: only the live ones are.
    exported = {s.labels["release"] for f in registry.collect() for s in f.samples if "release" in s.labels}
    assert exported <= {"r3", "r4", "none", "cand-6-r1", "cand-7-r1", "cand-5-r1"}, exported


def test_without_the_window_releases_and_candidates_accumulate(redis_client: redis.Redis) -> None:
    """The check above catches the leak: with windows longer than the run, every release stays."""
    month = 60 * 86400.0
    _, daily = run(
        redis_client,
        MetricsScenario(["acme"]),
        release_window_s=month,
        variant_window_s=month,
        max_releases_per_tenant=50,
    )
    series = [d["acme"] for d in daily]
    assert max(series[8:]) > FLAT * max(series[:8]), series


def test_a_tenant_sending_garbage_labels_grows_no_one_s_series(redis_client: redis.Redis) -> None:
    redis_client.flushdb()
    _, alone = run(redis_client, MetricsScenario(["acme"]))
    redis_client.flushdb()
    registry, beside = run(redis_client, MetricsScenario(["acme"], hostile=["evil"]))
    assert [d["acme"] for d in beside] == [d["acme"] for d in alone]
    evil = [d["evil"] for d in beside]
    assert max(evil) <= BUDGET_PER_TENANT, evil
    assert max(evil[8:]) <= FLAT * max(evil[:8]), evil
    folded = {
        s.labels["label"]: s.value
        for f in registry.collect()
        for s in f.samples
        if s.name == "ragmon_rag_label_values_folded_total" and s.labels["tenant"] == "evil"
    }
    assert folded["variant"] > 0 and folded["release"] > 0, folded


# Series one tenant of the scenario may cost each other worker at the defaults (docs/series-budget.md).
WORKER_BUDGETS = {"exclusion": 2600, "drift": 100, "shadow": 1500, "faithfulness": 650}
# All workers together, one replica each: the metrics worker's and the others'.
TOTAL_BUDGET = BUDGET_PER_TENANT + sum(WORKER_BUDGETS.values())
Daily = dict[str, list[dict[str, int]]]  # worker -> per day, tenant -> series


def run_workers(client: redis.Redis, model_dir: str, scenario: WorkersScenario) -> Daily:
    client.flushdb()
    drivers = other_workers(client, scenario, model_dir)
    daily: Daily = {d.name: [] for d in drivers}
    for day in range(DAYS + 1):
        scenario.run_day(drivers, day)
        for d in drivers:
            daily[d.name].append(
                {
                    t: sum(series_by_family(d.registry, t).values())
                    for t in scenario.tenants + scenario.hostile
                }
            )
    return daily


@pytest.fixture(scope="module")
def hhem_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return tiny_hhem_checkpoint(Path(tmp_path_factory.mktemp("series-hhem")))


@pytest.fixture(scope="module")
def workers_runs(redis_url: str, hhem_dir: str) -> tuple[Daily, Daily]:
    """The 30 days for acme alone, and for acme beside a tenant sending garbage labels."""
    client = redis.Redis.from_url(redis_url)
    try:
        alone = run_workers(client, hhem_dir, WorkersScenario(["acme"]))
        beside = run_workers(client, hhem_dir, WorkersScenario(["acme"], hostile=["evil"]))
    finally:
        client.flushdb()
        client.close()
    return alone, beside


@pytest.mark.slow
def test_every_workers_series_stay_flat_after_the_first_week_and_within_its_budget(
    workers_runs: tuple[Daily, Daily],
) -> None:
    alone, _ = workers_runs
    for worker, days in alone.items():
        series = [d["acme"] for d in days]
        assert min(series) > 0, (worker, series)
        assert max(series[8:]) <= FLAT * max(series[:8]), (worker, series)
        assert max(series) <= WORKER_BUDGETS[worker], (worker, series)
    assert sum(max(d["acme"] for d in days) for days in alone.values()) + BUDGET_PER_TENANT <= TOTAL_BUDGET


@pytest.mark.slow
def test_a_tenant_sending_garbage_labels_grows_no_other_workers_series(
    workers_runs: tuple[Daily, Daily],
) -> None:
    alone, beside = workers_runs
    for worker in alone:
        assert [d["acme"] for d in beside[worker]] == [d["acme"] for d in alone[worker]], worker
        evil = [d["evil"] for d in beside[worker]]
        assert max(evil) <= WORKER_BUDGETS[worker], (worker, evil)
        assert max(evil[8:]) <= FLAT * max(evil[:8]), (worker, evil)
