"""The series budget (docs/series-budget.md): the metrics processor driven in process over 30 simulated
days of weekly releases, intents and candidates coming and going, against a real Redis."""

from __future__ import annotations

import redis
from prometheus_client import CollectorRegistry

from tests.support.series import MetricsScenario, series_by_family
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
