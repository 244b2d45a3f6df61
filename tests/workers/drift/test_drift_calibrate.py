"""Calibration on known shifts: false alarm rate, power, and the smallest shift seen."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from service.contracts.stats import wilson_interval
from workers.drift.calibrate import Calibration, Rate, calibrate, holdout_ood, render


def clusters(seed: int, sizes: list[int], centres: np.ndarray, spread: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    parts = [
        c + spread * rng.standard_normal((s, centres.shape[1])) for s, c in zip(sizes, centres, strict=True)
    ]
    return np.concatenate(parts).astype(np.float32)


CENTRES = np.eye(16, dtype=np.float64)[:5] * 4.0  # five topics; the fifth plays the new one


def test_calibration_reports_alpha_level_false_alarms_and_growing_power() -> None:
    reference = clusters(1, [100, 100, 100, 100], CENTRES[:4])
    ood = clusters(2, [100], CENTRES[4:])
    report = calibrate(
        reference,
        ood,
        window=40,
        alpha=0.05,
        permutations=99,
        repetitions=60,
        rng=np.random.default_rng(3),
        shifts=(0.0, 0.05, 0.3, 0.5),
    )
    rates = {r.shift: r for r in report.rows}
    low, high = stats.binom.interval(0.999, 60, 0.05)
    assert low <= rates[0.0].detections <= high
    assert rates[0.5].rate >= 0.8
    assert rates[0.05].rate < rates[0.5].rate
    smallest = report.smallest_detected_shift()
    assert smallest is not None and smallest <= 0.5
    assert all(r.low <= r.rate <= r.high for r in report.rows)


def test_calibration_on_real_queries_sees_a_new_topic(topic_embeddings: dict[str, np.ndarray]) -> None:
    report = calibrate(
        topic_embeddings["billing"],
        topic_embeddings["devops"],
        window=20,
        alpha=0.05,
        permutations=99,
        repetitions=30,
        rng=np.random.default_rng(4),
        shifts=(0.0, 1.0),
    )
    no_shift, full = report.rows
    assert full.rate == 1.0
    assert no_shift.detections <= stats.binom.ppf(0.999, 30, 0.05)


def test_holdout_takes_the_topic_farthest_from_the_rest() -> None:
    far = np.zeros((1, 16))
    far[0, 15] = 40.0
    sample = clusters(5, [60, 60, 60, 20], np.concatenate([CENTRES[:3], far]), spread=0.3)
    pool, ood = holdout_ood(sample, np.random.default_rng(0), clusters=4)
    assert ood.shape == (20, 16)
    assert np.all(ood[:, 15] > 30) and np.all(pool[:, 15] < 10)


def test_too_small_a_sample_names_what_to_change() -> None:
    rng = np.random.default_rng(0)
    sample = rng.standard_normal((50, 4)).astype(np.float32)
    with pytest.raises(
        ValueError, match=r"reference: 50 in-distribution rows .* at least 60 rows or a smaller --window"
    ):
        calibrate(sample, sample, window=30, alpha=0.05, permutations=99, repetitions=2, rng=rng)
    with pytest.raises(
        ValueError,
        match=r"ood: 5 out-of-distribution rows cannot make a 50% mix of a window of 20 \(needs 10\)",
    ):
        calibrate(sample, sample[:5], window=20, alpha=0.05, permutations=99, repetitions=2, rng=rng)
    with pytest.raises(ValueError, match="permutations=10 cannot reach alpha=0.05"):
        calibrate(sample, sample, window=10, alpha=0.05, permutations=10, repetitions=2, rng=rng)


def test_wilson_interval() -> None:
    assert wilson_interval(0, 20)[0] == 0.0
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)


def test_render_states_the_smallest_shift_and_warns_on_inflated_false_alarms() -> None:
    rows = [
        Rate(0.0, 9, 50, *wilson_interval(9, 50)),
        Rate(0.1, 30, 50, *wilson_interval(30, 50)),
        Rate(0.2, 45, 50, *wilson_interval(45, 50)),
    ]
    text = render(Calibration(100, 0.01, 999, 50, "file x", rows))
    assert "| 20% | 0.900 |" in text
    assert "smallest shift detected with 80% power at window 100 and alpha 0.01: 20%" in text
    assert "WARNING: the false alarm rate 0.180 is above alpha 0.01" in text
    none = render(Calibration(100, 0.01, 999, 50, "file x", rows[:2]))
    assert "no tested shift reached 80% power at window 100" in none
