"""WindowedCap, prune and the Children cache (docs/series-budget.md): pure logic, no process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from workers.exclusion.config import ExclusionConfig
from workers.exclusion.evaluate import QueryOutcome
from workers.exclusion.metrics import ExclusionMetrics
from workers.faithfulness.metrics import FaithfulnessMetrics
from workers.runtime.labels import Children, DeferredCounts, WindowedCap, families_with, prune


def test_windowed_cap_keeps_the_recent_values_folds_the_rest_and_expires_the_old() -> None:
    folded: list[str] = []
    cap = WindowedCap(2, window_s=100, always=("production",), on_fold=folded.append)
    assert [cap("t", v, 0) for v in ("production", "a", "b", "c")] == ["production", "a", "b", "other"]
    assert folded == ["t"]
    assert cap("u", "c", 0) == "c"  # per tenant
    assert cap("t", "a", 90) == "a"  # seen again: live longer
    assert cap.expire(150) == [("t", "b"), ("u", "c")]
    assert cap.live("t") == ["a"]
    assert cap("t", "c", 150) == "c"  # room again
    assert cap.force("t", "d", 160) == "a"  # authoritative: the least recently seen makes room
    assert cap.live("t") == ["c", "d"]


def test_prune_removes_the_series_and_their_cached_children() -> None:
    registry = CollectorRegistry()
    by_release = Counter("x_total", "x", ["tenant", "variant", "release"], registry=registry)
    by_variant = Counter("y_total", "y", ["tenant", "variant"], registry=registry)
    child = Children()
    for release in ("r1", "r2"):
        child(by_release, "t", "production", release).inc()
    child(by_release, "u", "production", "r1").inc()
    child(by_variant, "t", "production").inc()
    families = families_with([by_release, by_variant], "release")
    assert families == [by_release]
    prune(families, {"tenant": "t", "release": "r1"}, child)
    left = {tuple(s.labels.values()) for s in registry.collect() for s in s.samples if s.name == "x_total"}
    assert left == {("t", "production", "r2"), ("u", "production", "r1")}
    # a later count recreates the series (from 0: a counter reset to rate()), exported again
    child(by_release, "t", "production", "r1").inc()
    assert (
        registry.get_sample_value("x_total", {"tenant": "t", "variant": "production", "release": "r1"}) == 1
    )
    assert registry.get_sample_value("y_total", {"tenant": "t", "variant": "production"}) == 1


def test_the_exclusion_worker_removes_the_series_of_a_variant_that_left_the_window() -> None:
    now = [0.0]
    registry = CollectorRegistry()
    metrics = ExclusionMetrics(
        registry, ExclusionConfig(max_variants=1, variant_window_s=100), clock=lambda: now[0]
    )
    outcome = QueryOutcome("labels", ("d1",), {})
    metrics.record_query("t", "cand-a", "billing", outcome)
    metrics.record_query("t", "cand-b", "billing", outcome)  # over the cap: other, counted as folded
    assert (
        registry.get_sample_value(
            "ragmon_exclusion_label_values_folded_total", {"tenant": "t", "label": "variant"}
        )
        == 1
    )
    now[0] = 200.0
    metrics.record_query("t", "cand-b", "billing", outcome)  # the sweep forgot cand-a: room for cand-b
    variants = {s.labels["variant"] for f in registry.collect() for s in f.samples if "variant" in s.labels}
    assert variants == {"other", "cand-b"}


def test_the_faithfulness_worker_forgets_a_variant_s_series_and_recreates_them_when_it_returns() -> None:
    registry = CollectorRegistry()
    metrics = FaithfulnessMetrics(registry)
    metrics.touch("t", "cand-a")
    metrics.touch("t", "production")

    def variants() -> set[str]:
        return {s.labels["variant"] for f in registry.collect() for s in f.samples if "variant" in s.labels}

    assert variants() == {"cand-a", "production"}
    metrics.forget("t", "cand-a")
    assert variants() == {"production"}
    metrics.touch("t", "cand-a")  # back in the window: its series at 0 again
    assert variants() == {"cand-a", "production"}


def test_deferred_counts_create_the_series_at_once_and_count_only_when_applied() -> None:
    registry = CollectorRegistry()
    counter = Counter("ragmon_test_deferred_total", "t", ["tenant"], registry=registry)
    children = Children()
    counts = DeferredCounts(children)
    counts(counter, "acme").inc(2)
    counts(counter, "acme").inc()
    # The series exists at 0 (an alert sees the first increase), the increments wait.
    assert registry.get_sample_value("ragmon_test_deferred_total", {"tenant": "acme"}) == 0
    counts.apply()
    assert registry.get_sample_value("ragmon_test_deferred_total", {"tenant": "acme"}) == 3
    counts.apply()  # applied once
    assert registry.get_sample_value("ragmon_test_deferred_total", {"tenant": "acme"}) == 3
    abandoned = DeferredCounts(children)
    abandoned(counter, "acme").inc(5)  # a try that failed: never applied
    assert registry.get_sample_value("ragmon_test_deferred_total", {"tenant": "acme"}) == 3


def test_deferred_observations_are_applied_in_order_and_the_last_set_wins() -> None:
    registry = CollectorRegistry()
    histogram = Histogram("ragmon_test_deferred_seconds", "t", ["tenant"], buckets=(1, 2), registry=registry)
    gauge = Gauge("ragmon_test_deferred_ratio", "t", ["tenant"], registry=registry)
    counts = DeferredCounts(Children())
    for value in (0.5, 1.5, 3.0):
        counts(histogram, "acme").observe(value)
    counts(gauge, "acme").set(0.25)
    counts(gauge, "acme").set(0.75)
    assert registry.get_sample_value("ragmon_test_deferred_seconds_count", {"tenant": "acme"}) == 0
    counts.apply()
    sample = registry.get_sample_value
    assert sample("ragmon_test_deferred_seconds_count", {"tenant": "acme"}) == 3
    assert sample("ragmon_test_deferred_seconds_bucket", {"tenant": "acme", "le": "1.0"}) == 1
    assert sample("ragmon_test_deferred_seconds_bucket", {"tenant": "acme", "le": "2.0"}) == 2
    assert sample("ragmon_test_deferred_seconds_sum", {"tenant": "acme"}) == 5.0
    assert sample("ragmon_test_deferred_ratio", {"tenant": "acme"}) == 0.75
