"""Families (one declaration a family, stating only what differs), moments and at_zero: pure logic, no process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from workers.runtime.families import Families, at_zero


def test_a_declaration_takes_the_shared_labels_unless_it_names_its_own() -> None:
    registry = CollectorRegistry()
    f = Families(registry, ["tenant", "variant"])
    shared = f.counter("x_shared_total", "shared")
    own = f.gauge("x_own", "own", ["tenant"])
    none = f.gauge("x_none", "none", ())
    assert (type(shared), type(own), type(none)) == (Counter, Gauge, Gauge)
    assert shared._labelnames == ("tenant", "variant")
    assert own._labelnames == ("tenant",)
    assert none._labelnames == ()
    assert Families(registry).counter("x_bare_total", "bare")._labelnames == ()
    none.set(1)
    assert registry.get_sample_value("x_none") == 1.0
    assert registry.get_sample_value("x_shared_total", {"tenant": "t", "variant": "v"}) is None


def test_a_histogram_keeps_its_buckets_and_documentation() -> None:
    registry = CollectorRegistry()
    h = Families(registry, ["tenant"]).histogram("x_duration_seconds", "How long", buckets=(0.5, 1, 5))
    assert isinstance(h, Histogram)
    assert h._upper_bounds == [0.5, 1.0, 5.0, float("inf")]
    assert h._documentation == "How long"
    h.labels("t").observe(2)
    assert registry.get_sample_value("x_duration_seconds_bucket", {"tenant": "t", "le": "5.0"}) == 1.0


def test_moments_are_the_sums_labelled_by_key_and_the_count_without() -> None:
    registry = CollectorRegistry()
    f = Families(registry, ["tenant"])
    sums, squares, count = f.moments(
        ["tenant", "stage"],
        ["metric", "k"],
        sums=("x_score_sum_total", "Sum of values"),
        squares=("x_score_squares_total", "Sum of squared values"),
        count=("x_items_total", "Items"),
    )
    assert all(type(c) is Counter for c in (sums, squares, count))
    assert sums._labelnames == squares._labelnames == ("tenant", "stage", "metric", "k")
    assert count._labelnames == ("tenant", "stage")
    assert (sums._documentation, squares._documentation, count._documentation) == (
        "Sum of values",
        "Sum of squared values",
        "Items",
    )
    assert [m.name for m in registry.collect()] == ["x_score_sum", "x_score_squares", "x_items"]


def test_at_zero_creates_a_series_for_each_value_after_the_given_labels() -> None:
    registry = CollectorRegistry()
    c = Families(registry, ["tenant", "reason"]).counter("x_skipped_total", "skipped")
    at_zero(c, "t", each=("a", "b"))
    assert registry.get_sample_value("x_skipped_total", {"tenant": "t", "reason": "a"}) == 0.0
    assert registry.get_sample_value("x_skipped_total", {"tenant": "t", "reason": "b"}) == 0.0
    assert registry.get_sample_value("x_skipped_total", {"tenant": "u", "reason": "a"}) is None
    g = Families(registry, ["source"]).gauge("x_up", "up")
    at_zero(g, each=["model"])
    assert registry.get_sample_value("x_up", {"source": "model"}) == 0.0
