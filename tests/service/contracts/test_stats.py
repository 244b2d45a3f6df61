"""The numeric helpers the service and the workers share (service/contracts/stats.py)."""

from __future__ import annotations

import math

import pytest

from service.contracts.stats import is_finite, json_finite, wilson_interval


def test_wilson_interval_holds_the_proportion_and_stays_in_0_1() -> None:
    for trials in (1, 2, 7, 50, 1000):
        for successes in range(trials + 1):
            low, high = wilson_interval(successes, trials)
            assert 0.0 <= low <= successes / trials <= high <= 1.0
    low, high = wilson_interval(5, 10)
    assert math.isclose(low, 0.2366, abs_tol=1e-4) and math.isclose(high, 0.7634, abs_tol=1e-4)
    with pytest.raises(ValueError, match="trials must be positive"):
        wilson_interval(0, 0)


def test_is_finite_refuses_missing_nan_and_infinities() -> None:
    assert is_finite(0) and is_finite(-2.5)
    assert not any(is_finite(v) for v in (None, math.nan, math.inf, -math.inf))


def test_json_finite_nulls_nan_and_infinities_everywhere() -> None:
    value = {"a": math.inf, "b": [1.0, math.nan, {"c": -math.inf}], "d": "x", "e": 3}
    assert json_finite(value) == {"a": None, "b": [1.0, None, {"c": None}], "d": "x", "e": 3}
