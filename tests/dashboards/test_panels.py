"""The panel builders: each shape's defaults, and a caller's keyword winning over them; the latency
panels several boards share (dashboards.common)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dashboards.common import p95_panel, quantile_lines
from dashboards.model import Panel, bad_above, bad_below
from dashboards.panels import (
    UP_DOWN,
    counter,
    failures_panel,
    per_second_panel,
    rate_with_sample,
    share_panel,
    up_stat,
)
from dashboards.promql import TENANT, per_second, quantile, zero_when_absent


def test_counter_reads_zero_only_when_asked() -> None:
    plain = per_second("ragmon_x_total", "reason", TENANT)
    assert counter("ragmon_x_total", "reason", "{{reason}}", TENANT).expr == plain
    assert counter("ragmon_x_total", "reason", "l", TENANT, zero="reason").expr == zero_when_absent(
        plain, "reason"
    )
    # "" is a zero without a label (a counter summed over everything), not "no zero"
    assert counter("ragmon_x_total", "", "l", zero="").expr == zero_when_absent(
        per_second("ragmon_x_total", "")
    )


def test_counter_passes_the_function_and_window_on() -> None:
    target = counter("ragmon_x_total", "kind", "{{kind}}", fn="increase", window="$__range")
    assert target.expr == "sum by (kind) (increase(ragmon_x_total[$__range]))"
    assert target.legend == "{{kind}}"


@pytest.mark.parametrize(
    ("build", "defaults"),
    [
        (per_second_panel, {"unit": "reqps", "stacked": True}),
        (share_panel, {"unit": "percentunit", "minimum": 0}),
        (failures_panel, {"thresholds": bad_above(1), "decimals": 0}),
    ],
)
def test_a_shape_fills_its_defaults(build: Callable[..., Panel], defaults: dict[str, object]) -> None:
    panel = build("t", counter("ragmon_x_total", "", "x"))
    assert panel.kind == "timeseries"
    assert {key: getattr(panel, key) for key in defaults} == defaults


def test_the_callers_keyword_wins_over_the_shape() -> None:
    panel = per_second_panel("t", counter("ragmon_x_total", "", "x"), stacked=False, unit="short", width=12)
    assert (panel.stacked, panel.unit, panel.width) == (False, "short", 12)
    stat = up_stat("ready", counter("ragmon_x_total", "", "x"), mappings=(("0", "no", "red"),))
    assert stat.kind == "stat" and stat.thresholds == bad_below(1) and stat.mappings == (("0", "no", "red"),)
    assert up_stat("up", counter("ragmon_x_total", "", "x")).mappings == UP_DOWN


def test_a_rate_comes_with_its_sample_beside_it() -> None:
    rate = share_panel("Failure rate", counter("ragmon_x_total", "", "x"), width=12)
    pair = rate_with_sample(rate, "Answers checked", counter("ragmon_y_total", "", "y"), "the n", width=12)
    assert pair[0] is rate
    assert (pair[1].title, pair[1].description, pair[1].minimum, pair[1].width) == (
        "Answers checked",
        "the n",
        0,
        12,
    )


def test_a_p95_panel_reads_its_histogram_by_a_label_in_seconds() -> None:
    panel = p95_panel("Batch p95", "ragmon_x_duration_seconds", "worker", "{{worker}}", TENANT, width=6)
    assert (panel.unit, panel.width) == ("s", 6)
    assert [(t.expr, t.legend) for t in panel.targets] == [
        (quantile(0.95, "ragmon_x_duration_seconds", "worker", TENANT), "{{worker}}")
    ]


def test_quantile_lines_name_each_quantile() -> None:
    assert [t.legend for t in quantile_lines("ragmon_x_duration_seconds")] == ["p50", "p95", "p99"]
    lines = quantile_lines("ragmon_x_ratio", TENANT, qs=(0.1, 0.9))
    assert [(t.expr, t.legend) for t in lines] == [
        (quantile(0.1, "ragmon_x_ratio", "", TENANT), "p10"),
        (quantile(0.9, "ragmon_x_ratio", "", TENANT), "p90"),
    ]
