"""Exact two-sided sign test on discordant pairs (= exact McNemar) and Holm's step-down correction.

Pure numpy/math (no scipy at run time): the binomial tail is summed in log
space, so a million discordant pairs cost one vectorised pass.
"""

from __future__ import annotations

import math

import numpy as np


def sign_test_p(wins: int, losses: int) -> float:
    """P(a score at least as uneven as wins:losses, either direction | no difference).

    Ties carry no information and are not counted. With no discordant pair the
    answer is 1.0 (no evidence), never 0.
    """
    if wins < 0 or losses < 0:
        raise ValueError("wins and losses must be >= 0")
    m = wins + losses
    k = min(wins, losses)
    if m == 0 or 2 * k == m:
        return 1.0
    return min(1.0, 2.0 * math.exp(_log_binom_half_cdf(k, m)))


def _log_binom_half_cdf(k: int, m: int) -> float:
    """log P(X <= k) for X ~ Binomial(m, 1/2)."""
    j = np.arange(1, k + 1, dtype=np.float64)
    # log C(m, j) built by cumulative ratios C(m, j) / C(m, j-1) = (m - j + 1) / j
    log_comb = np.concatenate(([0.0], np.cumsum(np.log(m - j + 1.0) - np.log(j))))
    top = log_comb.max()
    return float(top + math.log(np.exp(log_comb - top).sum()) - m * math.log(2.0))


def holm(p_values: list[float]) -> list[float]:
    """Holm-adjusted p-values (family-wise error over the metrics of one comparison).

    Valid under any dependence between the metrics. Adjusted p_(i) is the
    running max of (m - i + 1) * p_(i) in ascending order, capped at 1.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
