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

from service.rules.config import ThumbsDownRule
from tests.service.rules.regeneration_sim import print_band_table

STATIONARY_RATE = 0.2


def main(argv: list[str] | None = None) -> None:
    print_band_table(__doc__, ThumbsDownRule(), STATIONARY_RATE, [20, 120, 600], "votes", argv)


if __name__ == "__main__":
    main()
