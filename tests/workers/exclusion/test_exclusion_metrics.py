"""The exclusion worker's metrics: retrieval metrics by release, capped per tenant within a window.

Pure: ExclusionMetrics on its own registry with a fake clock (the processor paths are in
test_exclusion_retrieval.py and test_exclusion_simulated.py).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.exclusion.config import ExclusionConfig
from workers.exclusion.metrics import ExclusionMetrics
from workers.exclusion.retrieval import STAGES, series_keys

DAY = 86_400.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def values(recall: float, ks: list[int]) -> dict[str, dict[tuple[str, str], float]]:
    return {stage: dict.fromkeys(series_keys(ks), recall) for stage in STAGES}


def releases(registry: CollectorRegistry, tenant: str) -> dict[str, float]:
    """release -> labelled traces (candidates stage) as /metrics exports them."""
    out = {}
    for family in registry.collect():
        for s in family.samples:
            if (
                s.name == "ragmon_exclusion_retrieval_release_labelled_traces_total"
                and s.labels["tenant"] == tenant
                and s.labels["stage"] == "candidates"
            ):
                out[s.labels["release"]] = s.value
    return out


def test_releases_beyond_the_cap_are_other_and_counted_and_old_ones_leave() -> None:
    config = ExclusionConfig(max_releases=2, release_window_s=7 * DAY)
    registry, clock = CollectorRegistry(), Clock()
    m = ExclusionMetrics(registry, config, clock=clock)
    ks = list(config.retrieval_ks)
    for release in ("v1", "v2", "v3", "v3", None):
        m.record_retrieval("acme", "production", "billing", values(1.0, ks), release)
    m.record_retrieval("globex", "production", "billing", values(0.5, ks), "v9")  # its own cap
    assert releases(registry, "acme") == {"v1": 1, "v2": 1, "other": 2, "none": 1}
    assert releases(registry, "globex") == {"v9": 1}
    folded = registry.get_sample_value(
        "ragmon_exclusion_label_values_folded_total", {"tenant": "acme", "label": "release"}
    )
    assert folded == 2
    # The sums follow the same labels: Recall@5 summed over v1's one trace.
    recall = registry.get_sample_value(
        "ragmon_exclusion_retrieval_release_score_sum_total",
        {
            "tenant": "acme",
            "variant": "production",
            "release": "v1",
            "stage": "context",
            "metric": "recall",
            "k": "5",
        },
    )
    assert recall == 1.0

    # Eight days on, v1 and v2 have not been named: their series are removed, v3 takes a place.
    clock.now += 8 * DAY
    m.sweep(clock.now)
    m.record_retrieval("acme", "production", "billing", values(1.0, ks), "v3")
    assert releases(registry, "acme") == {"v3": 1, "other": 2, "none": 1}
    assert releases(registry, "globex") == {}  # globex's v9 left its window too
