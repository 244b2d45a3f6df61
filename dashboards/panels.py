"""The panel shapes the boards repeat, so that each board reads as a list of panels.

Panel builders by what a panel shows (`per_second_panel`, `share_panel`, `failures_panel`, `up_stat`, ...)
fill in the unit, bounds and thresholds that shape always has; every other `Panel` field passes through
as a keyword. Target builders (`counter`, `recorded`) write the PromQL the boards use again and again.
Pairs of panels: a guardrail's rate with the sample it rests on beside it (`rate_with_sample`), and a
share with its two-sample control band (`band_panel`).
"""

from __future__ import annotations

from typing import TypedDict, Unpack

from dashboards.model import Override, Panel, PanelKind, Steps, Target, bad_above, bad_below
from dashboards.promql import RATE_WINDOW, TV, per_second, sel, zero_when_absent
from service.rules.config import BandRule

UP_DOWN = (("0", "down", "red"), ("1", "up", "green"))
# Override properties for the bounds and thresholds drawn beside a measured line.
DASH = ("custom.lineStyle", {"fill": "dash", "dash": [10, 10]})
DASHED = (DASH, ("custom.fillOpacity", 0))


class Options(TypedDict, total=False):
    """Every `Panel` field after its title, kind and targets."""

    description: str
    unit: str
    thresholds: Steps
    minimum: float | None
    maximum: float | None
    decimals: int | None
    mappings: tuple[tuple[str, str, str], ...]
    overrides: tuple[Override, ...]
    stacked: bool
    width: int
    height: int
    no_value: str
    hidden_columns: tuple[str, ...]


def counter(
    metric: str,
    by: str,
    legend: str,
    *matchers: str,
    zero: str | None = None,
    fn: str = "rate",
    window: str = RATE_WINDOW,
) -> Target:
    """`per_second(metric, by, *matchers)` as one target. With `zero` (a label, or "" for none), a counter that
    exists only once something happened reads 0 rather than no data (`zero_when_absent`)."""
    expr = per_second(metric, by, *matchers, fn=fn, window=window)
    return Target(expr if zero is None else zero_when_absent(expr, zero), legend)


def recorded(series: str, legend: str, *matchers: str) -> Target:
    """A recording rule's series for the selected tenants and variants (and `matchers`)."""
    return Target(sel(series, TV, *matchers), legend)


def _panel(kind: PanelKind, title: str, targets: tuple[Target, ...], options: Options) -> Panel:
    return Panel(title, kind, targets, **options)


def timeseries(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    return _panel("timeseries", title, targets, options)


def stat(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    return _panel("stat", title, targets, options)


def table(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    return _panel("table", title, targets, options)


def bargauge(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    return _panel("bargauge", title, targets, options)


def per_second_panel(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    """Events per second, stacked by a label unless `stacked=False`."""
    options.setdefault("unit", "reqps")
    options.setdefault("stacked", True)
    return timeseries(title, *targets, **options)


def share_panel(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    """A share of something, from 0% up."""
    options.setdefault("unit", "percentunit")
    options.setdefault("minimum", 0)
    return timeseries(title, *targets, **options)


def count_panel(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    """A count (traces, votes, queries in a window), from 0 up."""
    options.setdefault("unit", "short")
    options.setdefault("minimum", 0)
    return timeseries(title, *targets, **options)


def ratio_panel(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    """A value between 0 and 1 (a score, a p-value, an overlap) that is not a percentage."""
    options.setdefault("minimum", 0)
    options.setdefault("maximum", 1)
    return timeseries(title, *targets, **options)


def seconds_panel(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    """Durations: latency quantiles, delays, ages."""
    options.setdefault("unit", "s")
    return timeseries(title, *targets, **options)


def failures_panel(title: str, *targets: Target, **options: Unpack[Options]) -> Panel:
    """Whole numbers of things that should not happen (dead letters, leaks, load failures): red from 1."""
    options.setdefault("thresholds", bad_above(1))
    options.setdefault("decimals", 0)
    return timeseries(title, *targets, **options)


def up_stat(title: str, target: Target, **options: Unpack[Options]) -> Panel:
    """Whether a dependency or worker is up: red below 1, the value mapped to words (UP_DOWN by default)."""
    options.setdefault("thresholds", bad_below(1))
    options.setdefault("mappings", UP_DOWN)
    return stat(title, target, **options)


def rate_with_sample(
    rate: Panel, sample_title: str, sample: Target, description: str, width: int = 8
) -> list[Panel]:
    """A guardrail's rate and, beside it, the sample it rests on: a rate from 3 answers reads as such."""
    return [rate, count_panel(sample_title, sample, description=description, width=width)]


def band_panel(title: str, prefix: str, rule: BandRule, what: str, legend: str, trials: str = "") -> Panel:
    """A share and its two-sample control band (service/rules/render.py band_rules): the recorded rate,
    the baseline and the band p̄ ± z·√(p̄(1−p̄)(1/n + 1/n_b)) around it, dashed. `prefix` is the recorded
    series' (`ragmon:refusal:`), `what` says what the share counts, `legend` names one series."""
    rate, base, half = (sel(f"{prefix}{name}", TV) for name in ("rate", "baseline_rate", "band_half_width"))
    return share_panel(
        f"{title} and its control band ({rule.window})",
        Target(rate, "rate " + legend),
        Target(base, "baseline " + legend),
        Target(f"{base} + {half}", "upper " + legend),
        Target(f"clamp_min({base} - {half}, 0)", "lower " + legend),
        description=f"{what} over {rule.window} against p̄ ± {rule.sigmas:g}·√(p̄(1−p̄)(1/n + 1/n_b)), p̄ "
        f"pooled with the {rule.baseline_window} ending {rule.baseline_offset} ago (alert with n ≥ "
        f"{rule.min_n}{trials}, n_b ≥ {rule.min_baseline_n}). The band needs that much history; no trials "
        "in the window: no data, not 0%.",
        overrides=(Override("^(upper|lower|baseline) .*", DASHED),),
        width=24,
        height=9,
    )
