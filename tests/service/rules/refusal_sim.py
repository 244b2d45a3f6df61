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

from service.rules.config import RefusalRule
from tests.service.rules.regeneration_sim import print_band_table

STATIONARY_RATE = 0.05


def main(argv: list[str] | None = None) -> None:
    print_band_table(__doc__, RefusalRule(), STATIONARY_RATE, [50, 200, 1000], "queries of the intent", argv)


if __name__ == "__main__":
    main()
