"""The MMD test against naive O(n²) loops, and its error rates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from workers.drift.mmd import (
    check_alpha_permutations,
    median_sigma,
    mmd2_unbiased,
    mmd_test,
    permuted_mmd2,
    rbf_kernel,
    squared_distances,
)


def naive_kernel(a: np.ndarray, b: np.ndarray, sigma: float) -> float:
    return math.exp(-sum((float(x) - float(y)) ** 2 for x, y in zip(a, b, strict=True)) / (2 * sigma * sigma))


def naive_mmd2(x: np.ndarray, y: np.ndarray, sigma: float) -> float:
    """The textbook unbiased estimator, term by term."""
    n, m = len(x), len(y)
    xx = sum(naive_kernel(x[i], x[j], sigma) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    yy = sum(naive_kernel(y[i], y[j], sigma) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    xy = sum(naive_kernel(x[i], y[j], sigma) for i in range(n) for j in range(m)) / (n * m)
    return xx + yy - 2 * xy


def naive_median_sigma(x: np.ndarray) -> float:
    d = [
        sum((float(a) - float(b)) ** 2 for a, b in zip(x[i], x[j], strict=True))
        for i in range(len(x))
        for j in range(i + 1, len(x))
    ]
    return math.sqrt(float(np.median(d)) / 2)


@pytest.mark.parametrize(
    ("n", "m", "dim", "shift"),
    [(2, 2, 2, 0.0), (5, 7, 3, 0.0), (20, 20, 4, 0.5), (13, 30, 1, 1.0), (8, 3, 6, 0.2)],
)
def test_mmd2_matches_naive_loop(n: int, m: int, dim: int, shift: float) -> None:
    rng = np.random.default_rng(n * 100 + m)
    x = rng.standard_normal((n, dim))
    y = rng.standard_normal((m, dim)) + shift
    sigma = naive_median_sigma(x)
    assert median_sigma(squared_distances(x, x)) == pytest.approx(sigma, rel=1e-12)
    result = mmd_test(x, y, alpha=0.05, permutations=99, rng=rng)
    assert result.sigma == pytest.approx(sigma, rel=1e-12)
    assert result.mmd2 == pytest.approx(naive_mmd2(x, y, sigma), rel=1e-10, abs=1e-13)


def test_every_permutation_matches_a_naive_relabelling() -> None:
    """The centred-kernel quadratic form equals MMD² of the relabelled sample, permutation by permutation."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((9, 3)), rng.standard_normal((6, 3)) + 0.4
    pooled = np.vstack([x, y])
    sigma = median_sigma(squared_distances(x, x))
    kernel = rbf_kernel(squared_distances(pooled, pooled), sigma)
    permuted = permuted_mmd2(kernel, 9, 25, np.random.default_rng(11))
    replay = np.random.default_rng(11)  # permuted_mmd2 draws one permutation of the pool per row
    for value in permuted:
        order = replay.permutation(len(pooled))
        in_x = np.isin(np.arange(len(pooled)), order[:9])
        assert value == pytest.approx(naive_mmd2(pooled[in_x], pooled[~in_x], sigma), rel=1e-5, abs=1e-7)


def test_float32_windows_give_the_float64_statistic() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((200, 384)).astype(np.float32)
    y = rng.standard_normal((150, 384)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    pooled32 = np.vstack([x, y])
    pooled64 = pooled32.astype(np.float64)
    sigma = median_sigma(squared_distances(x.astype(np.float64), x.astype(np.float64)))
    exact = mmd2_unbiased(rbf_kernel(squared_distances(pooled64, pooled64), sigma), 200)
    fast = mmd2_unbiased(rbf_kernel(squared_distances(pooled32, pooled32), sigma), 200)
    assert fast == pytest.approx(exact, rel=1e-4, abs=1e-9)


def test_p_value_is_never_zero() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((30, 4))
    y = rng.standard_normal((30, 4)) + 25.0  # no permutation comes near the observed statistic
    result = mmd_test(x, y, alpha=0.05, permutations=199, rng=rng)
    assert result.p_value == pytest.approx(1 / 200)
    assert result.p_value > 0
    assert result.drift


@pytest.mark.parametrize("seed", range(6))
def test_drift_flag_is_the_threshold_crossing(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((25, 3))
    y = rng.standard_normal((25, 3)) + 0.15 * seed
    result = mmd_test(x, y, alpha=0.1, permutations=199, rng=rng)
    assert result.drift == (result.p_value <= 0.1)
    assert result.drift == (result.mmd2 > result.threshold)


def test_false_alarm_rate_within_binomial_interval_of_alpha() -> None:
    """Same distribution on both sides: the level of the test is alpha (exact with alpha·(B+1) integral)."""
    alpha, permutations, repetitions = 0.05, 99, 400
    alarms = 0
    for seed in range(repetitions):
        rng = np.random.default_rng(10_000 + seed)
        pool = rng.standard_t(df=5, size=(80, 8))  # heavy tails: no Gaussian assumption anywhere
        result = mmd_test(pool[:40], pool[40:], alpha=alpha, permutations=permutations, rng=rng)
        alarms += result.drift
    low, high = stats.binom.interval(0.999, repetitions, alpha)
    assert low <= alarms <= high, f"{alarms} false alarms in {repetitions} tests at alpha={alpha}"


def test_power_against_a_clear_shift() -> None:
    detections = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        result = mmd_test(
            rng.standard_normal((40, 8)),
            rng.standard_normal((40, 8)) + 0.6,
            alpha=0.05,
            permutations=99,
            rng=rng,
        )
        detections += result.drift
    assert detections >= 36


def test_alpha_the_permutations_cannot_reach_is_refused() -> None:
    with pytest.raises(ValueError, match=r"permutations=50 cannot reach alpha=0.01.*permutations >= 99"):
        check_alpha_permutations(0.01, 50)
    check_alpha_permutations(0.01, 99)


def test_windows_of_different_width_are_refused() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="same width"):
        mmd_test(
            rng.standard_normal((10, 4)), rng.standard_normal((10, 5)), alpha=0.05, permutations=99, rng=rng
        )


def test_too_small_windows_are_refused() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least 2 rows"):
        mmd_test(
            rng.standard_normal((10, 4)), rng.standard_normal((1, 4)), alpha=0.05, permutations=99, rng=rng
        )
