"""RagmonThumbsDownOutOfBand: the regeneration band's mirror counts what the rendered thumbs rules count,
and the band's rates on votes meet the budget (docs/thumbs-down-band.md): at most 0.03 false alerts per
tenant per day on stationary votes, a doubling seen within two hours at 120 votes/hour in 90% of runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.rules.config import ThumbsDownRule
from tests.service.rules.mirror import Counter, assert_rules_count_as_simulated
from tests.service.rules.regeneration_sim import Band, false_alarms_per_day, power, traffic
from tests.service.rules.thumbs_down_sim import STATIONARY_RATE

FALSE_ALERTS_PER_DAY_BUDGET = 0.03
SERIES = '{tenant="acme",variant="production"}'


@pytest.mark.slow
def test_the_simulation_counts_what_promtool_counts(tmp_path: Path) -> None:
    """One simulated tenant's votes through the real rules: votes, downs and their baselines agree."""
    band = Band.from_config(ThumbsDownRule())
    minutes = 1600
    votes, downs = traffic(np.random.default_rng(3), 1, minutes, 120, STATIONARY_RATE)
    vc, dc = np.cumsum(votes, axis=1)[0], np.cumsum(downs, axis=1)[0]
    labels = 'tenant="acme",variant="production",release="v1",intent="billing"'
    counters = [
        Counter("votes", None, vc),  # up + down
        Counter("downs", f'ragmon_feedback_thumbs_total{{{labels},direction="down"}}', dc),
    ]
    ups = [(f'ragmon_feedback_thumbs_total{{{labels},direction="up"}}', vc - dc)]
    checked = [30, 60, 61, 1499, 1500, 1501, 1560]
    assert_rules_count_as_simulated(tmp_path, band, "thumbs_down", SERIES, counters, checked, ups)


def test_false_alarms_on_stationary_votes_are_within_budget() -> None:
    band = Band.from_config(ThumbsDownRule())
    for per_hour in (20, 120, 600):
        rate = false_alarms_per_day(300, per_hour, band, rate=STATIONARY_RATE)
        assert rate <= FALSE_ALERTS_PER_DAY_BUDGET, per_hour


def test_a_doubling_is_detected_within_two_hours() -> None:
    band = Band.from_config(ThumbsDownRule())
    detected, delay = power(300, 120, band, step_rate=2 * STATIONARY_RATE, rate=STATIONARY_RATE)
    assert detected >= 0.9 and delay <= 90, (detected, delay)
