"""RagmonRefusalRateOutOfBand: the regeneration band's mirror counts what the rendered refusal rules count
per intent, and the band's rates meet the budget (docs/refusal-band.md): at most 0.01 false alerts per
intent per day on stationary refusals, a doubling seen within two hours at 1000 queries/hour of the intent
in 90% of runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.rules.config import RefusalRule
from tests.service.rules.mirror import Counter, assert_rules_count_as_simulated
from tests.service.rules.refusal_sim import STATIONARY_RATE
from tests.service.rules.regeneration_sim import Band, false_alarms_per_day, power, traffic

FALSE_ALERTS_PER_DAY_BUDGET = 0.01
SERIES = '{tenant="acme",variant="production",intent="billing"}'


@pytest.mark.slow
def test_the_simulation_counts_what_promtool_counts(tmp_path: Path) -> None:
    """One simulated intent's queries through the real rules: queries, refusals and their baselines agree."""
    band = Band.from_config(RefusalRule())
    minutes = 1600
    queries, refusals = traffic(np.random.default_rng(3), 1, minutes, 200, STATIONARY_RATE)
    qc, rc = np.cumsum(queries, axis=1)[0], np.cumsum(refusals, axis=1)[0]
    labels = 'tenant="acme",variant="production",intent="billing"'
    counters = [
        Counter("queries", f"ragmon_rag_queries_total{{{labels}}}", qc),
        Counter("refusals", f"ragmon_rag_refusals_total{{{labels}}}", rc),
    ]
    assert_rules_count_as_simulated(
        tmp_path, band, "refusal", SERIES, counters, [30, 60, 61, 1499, 1500, 1501, 1560]
    )


def test_false_alarms_on_stationary_refusals_are_within_budget() -> None:
    band = Band.from_config(RefusalRule())
    for per_hour in (50, 200, 1000):
        rate = false_alarms_per_day(300, per_hour, band, rate=STATIONARY_RATE)
        assert rate <= FALSE_ALERTS_PER_DAY_BUDGET, per_hour


def test_a_doubling_is_detected_within_two_hours() -> None:
    band = Band.from_config(RefusalRule())
    detected, delay = power(300, 1000, band, step_rate=2 * STATIONARY_RATE, rate=STATIONARY_RATE)
    assert detected >= 0.9 and delay <= 90, (detected, delay)
