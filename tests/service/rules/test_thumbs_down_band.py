"""RagmonThumbsDownOutOfBand: the regeneration band's mirror counts what the rendered thumbs rules count,
and the band's rates on votes meet the budget (docs/thumbs-down-band.md): at most 0.03 false alerts per
tenant per day on stationary votes, a doubling seen within two hours at 120 votes/hour in 90% of runs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from service.rules.cli import rendered_text
from service.rules.config import ThumbsDownRule
from tests.service.rules.regeneration_sim import Band, _window, false_alarms_per_day, power, traffic
from tests.service.rules.thumbs_down_sim import STATIONARY_RATE
from tests.support.tools import require_tool

FALSE_ALERTS_PER_DAY_BUDGET = 0.03
SERIES = '{tenant="acme",variant="production"}'


@pytest.mark.slow
def test_the_simulation_counts_what_promtool_counts(tmp_path: Path) -> None:
    """One simulated tenant's votes through the real rules: votes, downs and their baselines agree."""
    band = Band.from_config(ThumbsDownRule())
    minutes = 1600
    votes, downs = traffic(np.random.default_rng(3), 1, minutes, 120, STATIONARY_RATE)
    vc, dc = np.cumsum(votes, axis=1)[0], np.cumsum(downs, axis=1)[0]
    (tmp_path / "rules.yml").write_text(rendered_text(None))
    t = np.array([30, 60, 61, 1499, 1500, 1501, 1560])
    base_end = t - band.baseline_offset
    expected = {
        "votes": _window(vc[None, :], t, band.window)[0],
        "downs": _window(dc[None, :], t, band.window)[0],
        "baseline_votes": _window(vc[None, :], base_end, band.baseline_window)[0],
        "baseline_downs": _window(dc[None, :], base_end, band.baseline_window)[0],
    }
    cases = [
        {
            "expr": f"ragmon:thumbs_down:{name}",
            "eval_time": f"{minute}m",
            "exp_samples": [{"labels": f"ragmon:thumbs_down:{name}{SERIES}", "value": int(value)}],
        }
        for name, values in expected.items()
        for minute, base_minute, value in zip(t, base_end, values, strict=True)
        if not (name.startswith("baseline") and base_minute < 0)
    ]
    labels = 'tenant="acme",variant="production",release="v1",intent="billing"'
    series = [
        {
            "series": f'ragmon_feedback_thumbs_total{{{labels},direction="up"}}',
            "values": " ".join(map(str, vc - dc)),
        },
        {
            "series": f'ragmon_feedback_thumbs_total{{{labels},direction="down"}}',
            "values": " ".join(map(str, dc)),
        },
    ]
    (tmp_path / "sim.test.yml").write_text(
        yaml.safe_dump(
            {
                "rule_files": ["rules.yml"],
                "evaluation_interval": "1m",
                "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": cases}],
            }
        )
    )
    out = subprocess.run(
        [require_tool("promtool"), "test", "rules", "sim.test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def test_false_alarms_on_stationary_votes_are_within_budget() -> None:
    band = Band.from_config(ThumbsDownRule())
    for per_hour in (20, 120, 600):
        rate = false_alarms_per_day(300, per_hour, band, rate=STATIONARY_RATE)
        assert rate <= FALSE_ALERTS_PER_DAY_BUDGET, per_hour


def test_a_doubling_is_detected_within_two_hours() -> None:
    band = Band.from_config(ThumbsDownRule())
    detected, delay = power(300, 120, band, step_rate=2 * STATIONARY_RATE, rate=STATIONARY_RATE)
    assert detected >= 0.9 and delay <= 90, (detected, delay)
