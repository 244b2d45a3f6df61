"""The exported series of a comparison: set from a stored result, withdrawn when a slice leaves."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from tests.workers.shadow.test_shadow_compare import FAST, _category_lab
from workers.shadow.compare import compare
from workers.shadow.metrics import ShadowMetrics
from workers.shadow.results import comparison_from_dict


def test_publish_sets_and_withdraws_series() -> None:
    registry = CollectorRegistry()
    metrics = ShadowMetrics(registry)
    full = compare(_category_lab(), FAST)
    metrics.publish("acme", "rerank", comparison_from_dict(full.to_dict()))  # as read back from Redis
    slice_labels = {"tenant": "acme", "candidate": "rerank", "metric": "hit", "slice": "category=technical"}
    whole = {**slice_labels, "slice": "all"}
    assert registry.get_sample_value("ragmon_shadow_masked_regression", slice_labels) == 1.0
    assert registry.get_sample_value("ragmon_shadow_slice_pairs", slice_labels) == 6.0
    assert registry.get_sample_value("ragmon_shadow_wins", whole) == 9.0
    assert (
        registry.get_sample_value(
            "ragmon_shadow_verdict",
            {"tenant": "acme", "candidate": "rerank", "metric": "hit", "verdict": "inconclusive"},
        )
        == 1.0
    )
    assert registry.get_sample_value("ragmon_shadow_interval_lower", {**whole, "method": "bootstrap"}) > 0
    without_slices = full
    without_slices.slices = []
    metrics.publish("acme", "rerank", without_slices)
    assert registry.get_sample_value("ragmon_shadow_masked_regression", slice_labels) is None
    assert registry.get_sample_value("ragmon_shadow_wins", whole) == 9.0
