"""Coverage against the configured shadow rate: the exact binomial interval, the flag, the series, the report."""

from __future__ import annotations

import time

import pytest
import redis
from prometheus_client import CollectorRegistry
from scipy.stats import binomtest

from tests.workers.shadow.shadow_events import trace_body, trace_event
from workers.shadow.config import ShadowConfig
from workers.shadow.coverage import clopper_pearson, coverage_check
from workers.shadow.live import coverage, live_comparison
from workers.shadow.metrics import ShadowMetrics
from workers.shadow.processor import ShadowProcessor
from workers.shadow.report import render_markdown
from workers.shadow.store import ShadowStore


@pytest.mark.parametrize(
    ("k", "n", "alpha"), [(9, 10, 0.05), (0, 10, 0.05), (10, 10, 0.01), (200, 1000, 0.001), (1, 50, 0.001)]
)
def test_clopper_pearson_is_scipys_exact_interval(k: int, n: int, alpha: float) -> None:
    ci = binomtest(k, n).proportion_ci(1 - alpha, method="exact")
    assert clopper_pearson(k, n, alpha) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_far_is_outside_the_interval_which_narrows_with_traffic() -> None:
    # the same 12% against a configured 20%: noise on 50 requests, lost pairs on 5,000
    assert not coverage_check(50, 6, 6, 0.2, 0.001).coverage_off
    far = coverage_check(5000, 600, 600, 0.2, 0.001)
    assert far.coverage_off and far.upper is not None and far.upper < 0.2
    close = coverage_check(5000, 990, 990, 0.2, 0.001)  # 19.8%: within the interval
    assert not close.coverage_off and close.lower is not None and close.lower < 0.2 < close.upper
    none = coverage_check(0, 3, 0, 0.2, 0.001)  # no production traffic: no data, never 0% nor flagged
    assert none.coverage is None and not none.coverage_off
    unset = coverage_check(5000, 600, 600, None, 0.001)  # nothing configured: nothing to flag
    assert unset.coverage == 0.12 and not unset.coverage_off


def test_coverage_series_and_report_from_a_real_redis(redis_client: redis.Redis) -> None:
    config = ShadowConfig(
        expected_shadow_rate={"cand-half": 0.5, "cand-lossy": 0.5},
        recompute_every_pairs=10,
        min_pairs=5,
        resamples=200,
    )
    registry = CollectorRegistry()
    proc = ShadowProcessor(config, ShadowStore(redis_client, config), ShadowMetrics(registry))
    # 100 production requests before any candidate: not in either candidate's coverage
    proc.process([trace_event(trace_body(f"early{i}")) for i in range(100)])
    batch = []
    for i in range(600):
        batch.append(trace_event(trace_body(f"r{i}")))
        if i % 2 == 0:
            batch.append(trace_event(trace_body(f"r{i}", "cand-half")))  # shadows half, as configured
        if i % 4 == 0:
            batch.append(trace_event(trace_body(f"r{i}", "cand-lossy")))  # half configured, a quarter arrives
    proc.process(batch)
    proc.tick(time.time())

    def gauge(name: str, candidate: str) -> float | None:
        return registry.get_sample_value(name, {"tenant": "acme", "candidate": candidate})

    assert gauge("ragmon_shadow_coverage_ratio", "cand-half") == pytest.approx(300 / 600)
    assert gauge("ragmon_shadow_coverage_ratio", "cand-lossy") == pytest.approx(150 / 600)
    for candidate, flagged in (("cand-half", 0.0), ("cand-lossy", 1.0)):
        assert gauge("ragmon_shadow_expected_coverage_ratio", candidate) == 0.5
        assert gauge("ragmon_shadow_coverage_mismatch_detected", candidate) == flagged
        lower = gauge("ragmon_shadow_coverage_interval_lower_ratio", candidate)
        upper = gauge("ragmon_shadow_coverage_interval_upper_ratio", candidate)
        assert (
            lower is not None
            and upper is not None
            and lower < gauge("ragmon_shadow_coverage_ratio", candidate) < upper
        )
    assert (
        registry.get_sample_value(
            "ragmon_shadow_unpaired_traces",
            {"tenant": "acme", "candidate": "cand-lossy", "role": "production"},
        )
        == 450
    )

    lossy, _ = live_comparison(proc.store, config, "acme", "cand-lossy")
    assert lossy.context["coverage.coverage_off"] is True
    assert "FAR OFF" in render_markdown(lossy) and "25.0% of 600 production requests" in render_markdown(
        lossy
    )
    half, _ = live_comparison(proc.store, config, "acme", "cand-half")
    assert half.context["coverage.coverage_off"] is False and "consistent" in render_markdown(half)


def test_production_traces_in_flight_when_the_candidate_starts_count_once(redis_client: redis.Redis) -> None:
    config = ShadowConfig(expected_shadow_rate={"cand-a": 1.0})
    proc = ShadowProcessor(config, ShadowStore(redis_client, config), ShadowMetrics(CollectorRegistry()))
    proc.process([trace_event(trace_body(f"old{i}")) for i in range(50)])  # before the candidate: not counted
    proc.process([trace_event(trace_body(f"old{i}", "cand-a")) for i in range(40, 50)])  # in flight: counted
    proc.process([trace_event(trace_body(f"new{i}", v)) for i in range(30) for v in ("cand-a", "production")])
    cov = coverage(proc.store, config, "acme", "cand-a")
    assert (cov.production_traces, cov.pairs, cov.coverage) == (40, 40, 1.0)
    assert not cov.coverage_off
    proc.process([trace_event(trace_body(f"old{i}", "cand-a")) for i in range(40, 50)])  # redelivered
    assert coverage(proc.store, config, "acme", "cand-a") == cov
