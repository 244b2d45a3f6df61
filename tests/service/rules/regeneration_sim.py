"""False-alarm rate and power of RagmonRegenerationOutOfBand, by simulation.

    python -m tests.service.rules.regeneration_sim [--seeds 2000] [--per-hour 100 600 3000]

A pure-numpy mirror of the rendered rules' arithmetic (service/rules/render.py,
regeneration_rules and _regeneration), evaluated once a minute as Prometheus does
with a 1m scrape and evaluation interval:

* counters are sampled every minute; a window count is the counter's value at the
  window's end minus its value at the window's start, a series created inside the
  window counting from zero (promql.window_count: increase() for series that
  existed at the start, which on aligned 1m samples in Prometheus 2.x is exactly
  that difference; the whole value for series created inside it). No counter
  resets are simulated.
* current window [t-1h, t]; baseline [t-1h-1d, t-1h]; empty before ragmon ran.
* condition |x/n - x_b/n_b| > z*sqrt(p(1-p)(1/n + 1/n_b)), p = (x + x_b)/(n + n_b),
  n >= min_n, n_b >= min_baseline_n; `for: 30m` fires at the 31st consecutive true
  evaluation (parameters from the config defaults, Band.from_config). The one-evaluation lag between the recording and the alert group is
  ignored.

Traffic: Poisson queries per minute at a constant rate, each regenerated with
probability p (0.045, the acceptance run's true rate), independently. The run
starts with ragmon (empty history, the case that fired falsely) and lasts two days;
alerts per day = alert episodes / 2. Power: the rate steps up at 36h; detected =
the alert fires within 2h of the step.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from service.rules.config import BandRule, RegenerationRule, seconds

MINUTES_PER_DAY = 1440


@dataclass(frozen=True)
class Band:
    """The rule's parameters, in minutes (defaults of service/rules/config.py RegenerationRule; any
    BandRule through from_config: tests/service/rules/thumbs_down_sim.py uses the same mirror)."""

    window: int = 60
    baseline_window: int = 1440
    baseline_offset: int = 60
    min_n: int = 50
    min_baseline_n: int = 1000
    sigmas: float = 3.0
    for_minutes: int = 15
    two_sample: bool = True  # False: the old band, z*sqrt(p_b(1-p_b)/n), no baseline minimum

    @classmethod
    def from_config(cls, rule: BandRule) -> Band:
        minutes = lambda d: int(seconds(d) // 60)  # noqa: E731
        return cls(
            minutes(rule.window),
            minutes(rule.baseline_window),
            minutes(rule.baseline_offset),
            rule.min_n,
            rule.min_baseline_n,
            rule.sigmas,
            minutes(rule.for_),
        )


def traffic(
    rng: np.random.Generator,
    seeds: int,
    minutes: int,
    per_hour: float,
    rate: float,
    step_at: int | None = None,
    step_rate: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-minute queries and regenerations, shape (seeds, minutes)."""
    queries = rng.poisson(per_hour / 60.0, size=(seeds, minutes))
    p = np.full(minutes, rate)
    if step_at is not None and step_rate is not None:
        p[step_at:] = step_rate
    regenerations = rng.binomial(queries, p)
    return queries, regenerations


def _window(cum: np.ndarray, end: np.ndarray, length: int) -> np.ndarray:
    """Counter value at `end` minus at `end - length`; before the start the counter is 0 (no series)."""
    start = end - length
    at = lambda i: np.where(i[None, :] >= 0, cum[:, np.clip(i, 0, None)], 0)  # noqa: E731
    return at(end) - at(start)


def condition(queries: np.ndarray, regenerations: np.ndarray, band: Band) -> np.ndarray:
    """The alert expression at every minute, shape (seeds, minutes)."""
    minutes = queries.shape[1]
    qc, rc = np.cumsum(queries, axis=1), np.cumsum(regenerations, axis=1)
    t = np.arange(minutes)
    n, x = _window(qc, t, band.window), _window(rc, t, band.window)
    base_end = t - band.baseline_offset
    n_b, x_b = _window(qc, base_end, band.baseline_window), _window(rc, base_end, band.baseline_window)
    baseline_exists = (base_end >= 0)[None, :]  # `offset 1h` of a series that did not exist yet is empty
    with np.errstate(divide="ignore", invalid="ignore"):
        rate, base = x / n, x_b / n_b
        if band.two_sample:
            pooled = (x + x_b) / (n + n_b)
            half = band.sigmas * np.sqrt(pooled * (1 - pooled) * (1 / n + 1 / n_b))
            enough = (n >= band.min_n) & (n_b >= band.min_baseline_n)
        else:
            half = band.sigmas * np.sqrt(base * (1 - base) / n)
            enough = n >= band.min_n
        out = (np.abs(rate - base) > half) & enough & baseline_exists
    return np.nan_to_num(out, nan=False).astype(bool)


def firing_starts(cond: np.ndarray, for_minutes: int) -> np.ndarray:
    """Minutes at which an alert episode starts firing (pending for `for_minutes`, then firing)."""
    run = np.zeros(cond.shape[0], dtype=int)
    starts = np.zeros_like(cond)
    for t in range(cond.shape[1]):
        run = np.where(cond[:, t], run + 1, 0)
        starts[:, t] = run == for_minutes + 1
    return starts


def false_alarms_per_day(
    seeds: int, per_hour: float, band: Band, rate: float = 0.045, seed: int = 0
) -> float:
    days = 2
    q, r = traffic(np.random.default_rng(seed), seeds, days * MINUTES_PER_DAY, per_hour, rate)
    return float(firing_starts(condition(q, r, band), band.for_minutes).sum() / (seeds * days))


def power(
    seeds: int,
    per_hour: float,
    band: Band,
    step_rate: float,
    rate: float = 0.045,
    seed: int = 1,
    within: int = 120,
) -> tuple[float, float]:
    """Share of runs that fire within `within` minutes of a step at 36h, and their median delay (minutes)."""
    step_at = 36 * 60
    q, r = traffic(
        np.random.default_rng(seed), seeds, step_at + within + 1, per_hour, rate, step_at, step_rate
    )
    starts = firing_starts(condition(q, r, band), band.for_minutes)[:, step_at:]
    fired = starts.any(axis=1)
    delays = starts.argmax(axis=1)[fired]
    return float(fired.mean()), float(np.median(delays)) if fired.any() else float("nan")


def print_band_table(
    doc: str, rule: BandRule, rate: float, default_per_hour: list[float], unit: str, argv: list[str] | None
) -> None:
    """The `python -m tests.service.rules.<band>_sim` table of any BandRule: false alerts per day on
    stationary traffic at `rate`, and the power on a doubling and on a 1.5x step (thumbs-down and refusal)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2000)
    parser.add_argument("--per-hour", type=float, nargs="+", default=default_per_hour)
    args = parser.parse_args(argv)
    band, p = Band.from_config(rule), rate
    print(f"true rate {p}, default rule {band}, {args.seeds} seeds x 2 days from ragmon's start\n")
    print(
        f"| {unit}/hour | false alerts/day | power {p}->{2 * p:g} (median delay)"
        f" | power {p}->{1.5 * p:g} (median delay) |"
    )
    print("|---|---|---|---|")
    for per_hour in args.per_hour:
        fa = false_alarms_per_day(args.seeds, per_hour, band, rate=p)
        p2, d2 = power(args.seeds, per_hour, band, 2 * p, rate=p)
        p15, d15 = power(args.seeds, per_hour, band, 1.5 * p, rate=p)
        print(f"| {per_hour:.0f} | {fa:.4f} | {p2:.1%} ({d2:.0f} min) | {p15:.1%} ({d15:.0f} min) |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2000)
    parser.add_argument("--per-hour", type=float, nargs="+", default=[100, 600, 3000])
    args = parser.parse_args(argv)
    band = Band.from_config(RegenerationRule())
    old_band = Band(for_minutes=15, two_sample=False)
    print(f"true rate 0.045, default rule {band}, {args.seeds} seeds x 2 days from ragmon's start\n")
    print(
        "| queries/hour | false alerts/day | old band (one-sample, for 15m) | power 0.045->0.09 (median delay)"
        " | power 0.045->0.0675 (median delay) |"
    )
    print("|---|---|---|---|---|")
    for per_hour in args.per_hour:
        new = false_alarms_per_day(args.seeds, per_hour, band)
        old = false_alarms_per_day(args.seeds, per_hour, old_band)
        p2, d2 = power(args.seeds, per_hour, band, 0.09)
        p15, d15 = power(args.seeds, per_hour, band, 0.0675)
        print(
            f"| {per_hour:.0f} | {new:.4f} | {old:.4f} | {p2:.1%} ({d2:.0f} min) | {p15:.1%} ({d15:.0f} min) |"
        )


if __name__ == "__main__":
    main()
