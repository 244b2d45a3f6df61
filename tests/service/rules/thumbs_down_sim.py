"""False-alarm rate and power of RagmonThumbsDownOutOfBand, by simulation.

    python -m tests.service.rules.thumbs_down_sim [--seeds 2000] [--votes-per-hour 20 120 600]

The thumbs-down band is the regeneration band's machinery (service/rules/render.py band_rules) on other
counters: trials are thumbs votes (up and down), events the downs. So the mirror of the rendered rules is
regeneration_sim's, with the thumbs-down rule's parameters (Band.from_config(ThumbsDownRule())) and
traffic counted in votes: Poisson votes per minute, each down with probability p (0.2 stationary).
20/120/600 votes an hour are the simulator's thumbs share (20% of answers) of 100/600/3000 queries an
hour. Two days from ragmon's start per simulated tenant; alerts per day = alert episodes / 2. Power: the
rate steps up at 36h (0.2 -> 0.4, a doubling, and 0.2 -> 0.3); detected = fires within 2h of the step.
"""

from __future__ import annotations

import argparse

from service.rules.config import ThumbsDownRule
from tests.service.rules.regeneration_sim import Band, false_alarms_per_day, power

STATIONARY_RATE = 0.2


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2000)
    parser.add_argument("--votes-per-hour", type=float, nargs="+", default=[20, 120, 600])
    args = parser.parse_args(argv)
    band = Band.from_config(ThumbsDownRule())
    p = STATIONARY_RATE
    print(f"true rate {p}, default rule {band}, {args.seeds} seeds x 2 days from ragmon's start\n")
    print(
        f"| votes/hour | false alerts/day | power {p}->{2 * p:.1f} (median delay)"
        f" | power {p}->{1.5 * p:.1f} (median delay) |"
    )
    print("|---|---|---|---|")
    for per_hour in args.votes_per_hour:
        fa = false_alarms_per_day(args.seeds, per_hour, band, rate=p)
        p2, d2 = power(args.seeds, per_hour, band, 2 * p, rate=p)
        p15, d15 = power(args.seeds, per_hour, band, 1.5 * p, rate=p)
        print(f"| {per_hour:.0f} | {fa:.4f} | {p2:.1%} ({d2:.0f} min) | {p15:.1%} ({d15:.0f} min) |")


if __name__ == "__main__":
    main()
