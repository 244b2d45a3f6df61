"""False-alarm rate and power of RagmonRefusalRateOutOfBand, by simulation.

    python -m tests.service.rules.refusal_sim [--seeds 2000] [--per-hour 50 200 1000]

The refusal band is the regeneration band's machinery (service/rules/render.py band_rules) grouped by
(tenant, variant, intent): trials are one intent's queries, events its refusals. So the mirror of the
rendered rules is regeneration_sim's, once per intent, with the refusal rule's parameters
(Band.from_config(RefusalRule())): Poisson queries per minute, each refused with probability p (0.05
stationary). 50/200/1000 queries an hour are one intent's share of a small, a mid-sized and a busy tenant.
Two days from ragmon's start per simulated intent; alerts per day = alert episodes / 2, per intent (a
tenant with k intents sees about k times as many). Power: the rate steps up at 36h (0.05 -> 0.10, a
doubling, and 0.05 -> 0.075); detected = fires within 2h of the step.
"""

from __future__ import annotations

import argparse

from service.rules.config import RefusalRule
from tests.service.rules.regeneration_sim import Band, false_alarms_per_day, power

STATIONARY_RATE = 0.05


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2000)
    parser.add_argument("--per-hour", type=float, nargs="+", default=[50, 200, 1000])
    args = parser.parse_args(argv)
    band = Band.from_config(RefusalRule())
    p = STATIONARY_RATE
    print(f"true rate {p}, default rule {band}, {args.seeds} seeds x 2 days from ragmon's start\n")
    print(
        f"| queries/hour of the intent | false alerts/day per intent | power {p}->{2 * p:.2f} (median delay)"
        f" | power {p}->{1.5 * p:.3f} (median delay) |"
    )
    print("|---|---|---|---|")
    for per_hour in args.per_hour:
        fa = false_alarms_per_day(args.seeds, per_hour, band, rate=p)
        p2, d2 = power(args.seeds, per_hour, band, 2 * p, rate=p)
        p15, d15 = power(args.seeds, per_hour, band, 1.5 * p, rate=p)
        print(f"| {per_hour:.0f} | {fa:.4f} | {p2:.1%} ({d2:.0f} min) | {p15:.1%} ({d15:.0f} min) |")


if __name__ == "__main__":
    main()
