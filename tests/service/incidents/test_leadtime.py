"""Runs, matching and the summary of lead times on hand-made histories (pure logic)."""

from __future__ import annotations

import argparse

import pytest

from service.incidents.cli import duration_s, moment
from service.incidents.leadtime import Episode, Match, as_markdown, match, runs, summarize


def _e(name: str, tenant: str, start: float, active: float | None = None) -> Episode:
    return Episode(name, tenant, start, start + 60, active)


def test_runs_split_on_gaps_over_one_and_a_half_steps() -> None:
    assert runs([], 15) == []
    assert runs([0, 15, 30, 60, 75, 200], 15) == [(0, 30), (60, 75), (200, 200)]
    assert runs([30, 0, 15], 15) == [(0, 30)]  # order does not matter


def test_each_alert_takes_the_nearest_rise_of_its_own_tenant() -> None:
    alerts = [_e("A", "acme", 1000, active=900), _e("B", "globex", 1000)]
    rises = [
        _e("Thumbs", "acme", 1300),  # +300
        _e("Regen", "acme", 1200),  # +200: nearer
        _e("Regen", "globex", 9000),  # beyond the window
        _e("Thumbs", "initech", 1000),  # another tenant's users
    ]
    matches, unmatched = match(alerts, rises, window_s=600)
    by = {m.alert.name: m for m in matches}
    assert by["A"].rise == rises[1] and by["A"].lead_s == 200 and by["A"].detection_lead_s == 300
    assert by["B"].rise is None and by["B"].lead_s is None
    # a rise near an alert is not "unseen" even when another rise was nearer
    assert unmatched == [rises[3], rises[2]]


def test_users_first_is_a_negative_lead_and_ties_go_to_the_earlier_rise() -> None:
    alerts = [_e("A", "acme", 1000)]
    rises = [_e("Late", "acme", 1100), _e("Early", "acme", 900)]
    (m,), _ = match(alerts, rises, window_s=600)
    assert m.rise is not None and m.rise.name == "Early" and m.lead_s == -100
    assert m.detection_lead_s is None  # no pending start known


def test_the_window_is_inclusive() -> None:
    (m,), unmatched = match([_e("A", "acme", 0)], [_e("R", "acme", 600)], window_s=600)
    assert m.lead_s == 600 and unmatched == []


def test_summary_per_alert() -> None:
    ms = [
        Match(_e("A", "acme", 0), _e("R", "acme", 100)),
        Match(_e("A", "globex", 0), _e("R", "globex", -50)),
        Match(_e("A", "initech", 0), _e("R", "initech", 300)),
        Match(_e("A", "umbrella", 0), None),
        Match(_e("B", "acme", 0), None),
    ]
    a, b = summarize(ms)
    assert (a.alert, a.episodes, a.with_user_signal, a.users_first) == ("A", 4, 3, 1)
    assert (a.median_lead_s, a.min_lead_s, a.max_lead_s) == (100, -50, 300)
    assert (b.episodes, b.with_user_signal, b.median_lead_s) == (1, 0, None)


def test_an_empty_history_says_so() -> None:
    text = as_markdown([], [], 7200)
    assert "no guardrail alert fired in the range" in text and "no data" in text


def test_durations_and_moments() -> None:
    assert duration_s("90s") == 90 and duration_s("15m") == 900 and duration_s("2h") == 7200
    assert duration_s("7d") == 7 * 86400 and duration_s("1w") == 604800
    assert moment("1h", now=10_000) == 6400
    assert moment("1700000000") == 1_700_000_000
    assert moment("2026-12-01T00:00:00+00:00") == 1_796_083_200
    for bad in ("7 days", "-1h", "yesterday"):
        with pytest.raises(argparse.ArgumentTypeError, match="duration"):
            duration_s(bad) if bad != "yesterday" else moment(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="zone"):
        moment("2026-12-01T00:00:00")
