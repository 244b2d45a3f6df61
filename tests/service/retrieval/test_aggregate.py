"""Bootstrap means: the resampling is the ordinary bootstrap, seeded, and covers the truth at the nominal rate."""

from __future__ import annotations

import numpy as np

from service.retrieval.aggregate import (
    LABEL_MORE,
    BootstrapOptions,
    bootstrap_means,
    estimate_group,
    group_seed,
)


def test_counts_bootstrap_equals_resampling_indices() -> None:
    rng = np.random.default_rng(3)
    values = rng.random((57, 3))
    values[::4, 1] = np.nan  # no data in some rows of one column
    values[:, 2] = np.nan
    values[:5, 2] = [1, 0, 1, 1, 0]
    got = bootstrap_means(values, np.random.default_rng(11), 40)
    replay = np.random.default_rng(11)
    for b in range(40):
        idx = replay.integers(0, 57, 57, dtype=np.int32)
        drawn = values[idx]
        has = ~np.isnan(drawn)
        with np.errstate(invalid="ignore"):
            expected = np.where(has, drawn, 0).sum(axis=0) / has.sum(axis=0)
        np.testing.assert_allclose(got[b], expected, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_estimates_means_n_and_label_more() -> None:
    values = np.array([[1.0, np.nan], [0.0, 1.0], [1.0, np.nan], [1.0, 0.0]] * 10)  # 40 rows
    (small,) = estimate_group(values[:, 1:], ("t",), BootstrapOptions(min_n=30))
    assert small.n == 20 and small.mean == 0.5 and small.low is None and small.status == LABEL_MORE
    (big,) = estimate_group(values[:, :1], ("t",), BootstrapOptions(min_n=30))
    assert big.n == 40 and big.mean == 0.75 and big.status == "ok"
    assert big.low is not None and big.high is not None and big.low < 0.75 < big.high
    (empty,) = estimate_group(np.full((5, 1), np.nan), ("t",))
    assert empty.n == 0 and empty.mean is None and empty.status == "no data"
    (none,) = estimate_group(np.empty((0, 1)), ("t",))
    assert none.n == 0 and none.status == "no data"


def test_seeded_and_per_group() -> None:
    values = np.random.default_rng(0).random((200, 2))
    a = estimate_group(values, ("t", "x"), BootstrapOptions(seed=5))
    assert a == estimate_group(values, ("t", "x"), BootstrapOptions(seed=5))
    assert a != estimate_group(values, ("t", "x"), BootstrapOptions(seed=6))
    assert a != estimate_group(values, ("t", "y"), BootstrapOptions(seed=5))
    assert group_seed(1, ("a",)).entropy == group_seed(1, ("a",)).entropy


def test_intervals_cover_the_truth_at_about_the_nominal_rate() -> None:
    # 200 simulated report runs of 120 traces each: a hit (Bernoulli 0.3), a recall over 2 gold
    # ({0, .5, 1} with probabilities .2 .5 .3: mean .55), and an MRR-like skewed value.
    sim = np.random.default_rng(2026)
    truth = np.array([0.3, 0.55, np.mean(1 / np.arange(1, 11))])
    covered = np.zeros(3)
    repeats = 200
    for r in range(repeats):
        n = 120
        hit = (sim.random(n) < 0.3).astype(float)
        recall = sim.choice([0.0, 0.5, 1.0], n, p=[0.2, 0.5, 0.3])
        rr = 1 / sim.integers(1, 11, n)
        estimates = estimate_group(
            np.column_stack([hit, recall, rr]), ("sim", str(r)), BootstrapOptions(seed=r)
        )
        for j, e in enumerate(estimates):
            assert e.low is not None and e.high is not None
            covered[j] += e.low <= truth[j] <= e.high
    coverage = covered / repeats
    assert ((coverage >= 0.9) & (coverage <= 0.99)).all(), coverage
