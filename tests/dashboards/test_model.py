"""The builder: panel validation, grid layout, threshold steps, helper PromQL."""

from __future__ import annotations

import pytest

from dashboards.model import Panel, Row, Target, bad_above, bad_below
from dashboards.promql import TENANT, across_replicas, ratio, share, zero_when_absent
from dashboards.render import layout


def _panel(title: str, width: int, height: int = 8) -> Panel:
    return Panel(title, "timeseries", [Target("up")], width=width, height=height)


def test_a_panel_needs_a_query_and_a_width_inside_the_grid() -> None:
    with pytest.raises(ValueError, match="no query"):
        Panel("empty", "stat", [])
    with pytest.raises(ValueError, match="width 25"):
        _panel("wide", 25)


def test_layout_wraps_rows_and_numbers_panels_in_order() -> None:
    panels = layout(
        [
            Row("first", [_panel("a", 10), _panel("b", 10, height=5), _panel("c", 10)]),
            Row("second", [_panel("d", 24)]),
        ]
    )
    positions = {p["title"]: (p["id"], p["gridPos"]["x"], p["gridPos"]["y"]) for p in panels}
    assert positions == {
        "first": (1, 0, 0),
        "a": (2, 0, 1),
        "b": (3, 10, 1),
        "c": (4, 0, 9),
        "second": (5, 0, 17),
        "d": (6, 0, 18),
    }


def test_threshold_steps_colour_the_bad_side() -> None:
    assert bad_above(0.2).to_json()["steps"] == [
        {"color": "green", "value": None},
        {"color": "red", "value": 0.2},
    ]
    assert bad_below(0.5).to_json()["steps"] == [
        {"color": "red", "value": None},
        {"color": "green", "value": 0.5},
    ]


def test_helpers_parenthesize_so_operators_bind_as_written() -> None:
    assert (
        zero_when_absent("a", "reason") == '((a) or on () label_replace(vector(0), "reason", "none", "", ""))'
    )
    assert ratio("a or b", "c") == "(a or b) / (c > 0)"
    assert ratio("a", "c", per="") == "(a) / on () group_left () (c > 0)"
    assert share("a", "c") == "((a or c * 0)) / (c > 0)"


def test_replicas_copies_collapse_to_one_series_per_label_set() -> None:
    assert across_replicas("ragmon_x_ratio", "tenant, signal", TENANT) == (
        'max by (tenant, signal) (ragmon_x_ratio{tenant=~"$tenant"})'
    )
    assert across_replicas("ragmon_x_ratio", "probe_set", TENANT, 'slice="all"', agg="min") == (
        'min by (probe_set) (ragmon_x_ratio{tenant=~"$tenant", slice="all"})'
    )
