"""Pure statistics of shadow evaluation, against seed numbers and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from workers.shadow.bootstrap import BootstrapSettings, mean_difference_intervals, p95_ratio_interval
from workers.shadow.power import sign_test_detectable, sign_test_pairs_needed, sign_test_power
from workers.shadow.sequential import anytime_p_values, confidence_sequence
from workers.shadow.signtest import holm, sign_test_p


@pytest.mark.parametrize(
    ("wins", "losses", "expected"), [(9, 2, 0.065), (3, 1, 0.625), (1, 0, 1.0), (9, 4, 0.267), (4, 6, 0.754)]
)
def test_sign_test_matches_the_lab_numbers(wins: int, losses: int, expected: float) -> None:
    assert sign_test_p(wins, losses) == pytest.approx(expected, abs=0.0006)


def test_sign_test_23_to_1_is_below_one_in_a_thousand() -> None:
    assert sign_test_p(23, 1) < 0.001


@pytest.mark.parametrize(("wins", "losses"), [(0, 0), (5, 5), (0, 7), (30, 12), (480, 520), (4000, 4150)])
def test_sign_test_equals_scipy_binomtest(wins: int, losses: int) -> None:
    ours = sign_test_p(wins, losses)
    reference = 1.0 if wins + losses == 0 else stats.binomtest(wins, wins + losses, 0.5).pvalue
    assert ours == pytest.approx(reference, rel=1e-9, abs=1e-12)


def test_holm_step_down_by_hand() -> None:
    p = [0.01, 0.04, 0.03, 0.2, 0.001]
    # sorted: .001*5, .01*4, .03*3, .04*2 (running max keeps .09), .2*1
    assert holm(p) == pytest.approx([0.04, 0.09, 0.09, 0.2, 0.005])
    assert holm([]) == []


def _lab_pairs() -> np.ndarray:
    """56 questions: candidate won 9, lost 2, tied 45 (reranker vs hybrid, hit@1)."""
    return np.array([1.0] * 9 + [-1.0] * 2 + [0.0] * 45)[:, None]


def test_paired_bootstrap_reproduces_the_lab_interval() -> None:
    rng = np.random.default_rng(7)
    ((lo, hi),) = mean_difference_intervals(_lab_pairs(), BootstrapSettings(), rng)
    assert lo == pytest.approx(0.018, abs=0.01)
    assert hi == pytest.approx(0.232, abs=0.01)


def test_bootstrap_is_seeded_and_shares_resamples_across_metrics() -> None:
    d = np.random.default_rng(1).normal(0.1, 1.0, (300, 2))
    d[:, 1] = d[:, 0]
    a = mean_difference_intervals(d, BootstrapSettings(resamples=2000), np.random.default_rng(3))
    b = mean_difference_intervals(d, BootstrapSettings(resamples=2000), np.random.default_rng(3))
    assert np.array_equal(a, b)
    assert np.array_equal(a[0], a[1])  # same indices for both metrics


def test_bootstrap_skips_absent_metrics_per_pair() -> None:
    d = np.random.default_rng(2).normal(0.0, 1.0, (200, 2))
    d[::2, 1] = np.nan
    (lo0, hi0), (lo1, hi1) = mean_difference_intervals(
        d, BootstrapSettings(resamples=2000), np.random.default_rng(0)
    )
    assert hi1 - lo1 > hi0 - lo0  # half the pairs: a wider interval, not a NaN
    assert all(math.isfinite(x) for x in (lo1, hi1))


@pytest.mark.parametrize("kind", ["binary", "skewed"])
def test_large_window_regime_agrees_with_scipy_bootstrap(kind: str) -> None:
    rng = np.random.default_rng(11)
    n = 5000
    if kind == "binary":
        d = rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.08, 0.8, 0.12])
    else:
        d = rng.lognormal(0.0, 1.0, n) - rng.lognormal(0.0, 1.0, n) + 0.05
    settings = BootstrapSettings(resamples=4000, exact_max_pairs=1000)
    ((lo, hi),) = mean_difference_intervals(d[:, None], settings, np.random.default_rng(5))
    ref = stats.bootstrap(
        (d,),
        np.mean,
        n_resamples=4000,
        method="percentile",
        vectorized=True,
        random_state=np.random.default_rng(6),
    ).confidence_interval
    width = ref.high - ref.low
    assert lo == pytest.approx(ref.low, abs=0.05 * width)
    assert hi == pytest.approx(ref.high, abs=0.05 * width)


def test_p95_ratio_interval_brackets_a_known_slowdown() -> None:
    rng = np.random.default_rng(4)
    prod = rng.lognormal(-1.0, 0.5, 1500)
    cand = prod * 1.3 * rng.lognormal(0.0, 0.05, 1500)
    point, lo, hi = p95_ratio_interval(
        prod, cand, BootstrapSettings(resamples=2000), np.random.default_rng(1)
    )
    assert lo < 1.3 < hi or point == pytest.approx(1.3, rel=0.05)
    assert lo > 1.1


def test_confidence_sequence_is_wider_than_a_fixed_interval_and_its_p_value_matches() -> None:
    cs = confidence_sequence(500, 0.05, 0.2, alpha=0.05, tight_at=1000)
    half_fixed = 1.96 * math.sqrt(0.2 / 500)
    assert cs.upper - cs.mean > half_fixed
    # the anytime p-value is the alpha at which the sequence touches zero
    edge = confidence_sequence(500, cs.upper - cs.mean, 0.2, alpha=0.05, tight_at=1000)
    assert edge.p_value == pytest.approx(0.05, rel=1e-6)
    vec = anytime_p_values(np.array([500.0]), np.array([0.05]), np.array([0.2]), 0.05, 1000)
    assert vec[0] == pytest.approx(cs.p_value)


def test_confidence_sequence_without_variance_or_pairs() -> None:
    assert confidence_sequence(1, 0.3, 0.0, 0.05, 1000).p_value == 1.0
    assert confidence_sequence(100, 0.0, 0.0, 0.05, 1000).p_value == 1.0


@pytest.mark.parametrize(
    ("delta", "discordance", "power_at_56", "table_pairs"),
    [(0.03, 0.10, 0.03, 1200), (0.05, 0.10, 0.09, 400), (0.05, 0.20, 0.08, 800), (0.10, 0.20, 0.28, 200)],
)
def test_power_matches_the_lab_table(
    delta: float, discordance: float, power_at_56: float, table_pairs: int
) -> None:
    assert sign_test_power(56, discordance, delta) == pytest.approx(power_at_56, abs=0.011)
    needed = sign_test_pairs_needed(discordance, delta)
    assert needed < table_pairs  # the table rounds up ("~")
    assert (
        sign_test_power(math.ceil(needed * 1.15), discordance, delta) >= 0.8
    )  # the formula is ~5% optimistic
    assert sign_test_power(table_pairs, discordance, delta) > 0.8


def test_smallest_detectable_effect_inverts_pairs_needed() -> None:
    delta = sign_test_detectable(800, 0.2)
    assert sign_test_pairs_needed(0.2, delta) == pytest.approx(800, rel=1e-6)
    assert sign_test_detectable(56, 0.05) == math.inf  # no effect within the discordance is detectable
