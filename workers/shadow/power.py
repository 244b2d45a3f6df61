"""Power of the paired tests (see docs/shadow.md, "Power").

Binary outcomes: the exact sign test on discordant pairs. With n pairs, a
share q of them discordant and a net effect delta (wins minus losses over n),
the discordant count is Binomial(n, q) and each discordant pair is a win with
probability (q + delta) / (2q). `sign_test_power` sums that exactly;
the solvers use the normal approximation of the same test (Connor 1987), in
closed form, which is fast enough to run for every metric on every recompute
and is somewhat optimistic for small discordant counts (the exact test is
discrete and conservative).

Continuous outcomes: the paired z test on the differences' standard deviation.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

_Z = NormalDist()


def _z(p: float) -> float:
    return _Z.inv_cdf(p)


def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))))


def sign_test_power(n: int, discordance: float, delta: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided sign test at level alpha (O(n^2); for n up to a few thousand)."""
    if not 0 < discordance <= 1 or abs(delta) > discordance:
        raise ValueError("need 0 < discordance <= 1 and |delta| <= discordance")
    lf = _log_factorials(n)
    win = (discordance + abs(delta)) / (2.0 * discordance)
    total = 0.0
    for d in range(1, n + 1):
        k = np.arange(d + 1)
        log_comb = lf[d] - lf[k] - lf[d - k]
        null_cdf = np.cumsum(np.exp(log_comb - d * math.log(2.0)))
        rejecting = np.nonzero(2.0 * null_cdf <= alpha)[0]
        if rejecting.size == 0:
            continue
        c = int(rejecting[-1])
        alt = np.exp(log_comb + _log_pow(k, win) + _log_pow(d - k, 1.0 - win))
        p_reject = alt[: c + 1].sum() + alt[d - c :].sum()
        log_pmf_d = lf[n] - lf[d] - lf[n - d] + _log_pow(d, discordance) + _log_pow(n - d, 1.0 - discordance)
        total += math.exp(float(log_pmf_d)) * float(p_reject)
    return total


def _log_pow(count: np.ndarray | int, p: float) -> np.ndarray | float:
    if p <= 0.0:
        return np.where(np.asarray(count) == 0, 0.0, -np.inf)
    return np.asarray(count) * math.log(p)


def sign_test_pairs_needed(
    discordance: float, delta: float, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Pairs needed to detect net effect delta at this discordance (normal approximation)."""
    if delta == 0 or discordance <= 0 or abs(delta) > discordance:
        return math.inf
    za, zb = _z(1 - alpha / 2), _z(power)
    return (za * math.sqrt(discordance) + zb * math.sqrt(discordance - delta * delta)) ** 2 / (delta * delta)


def sign_test_detectable(n: int, discordance: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest net effect the sign test detects with this power at n pairs (bisection on the formula above)."""
    if n <= 0 or discordance <= 0:
        return math.inf
    lo, hi = 0.0, discordance
    if sign_test_pairs_needed(discordance, hi * (1 - 1e-9), alpha, power) > n:
        return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        if sign_test_pairs_needed(discordance, mid, alpha, power) > n:
            lo = mid
        else:
            hi = mid
    return hi


def mean_detectable(n: int, sd: float, alpha: float = 0.05, power: float = 0.8) -> float:
    if n <= 0:
        return math.inf
    return (_z(1 - alpha / 2) + _z(power)) * sd / math.sqrt(n)


def mean_pairs_needed(sd: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> float:
    if delta == 0:
        return math.inf
    return ((_z(1 - alpha / 2) + _z(power)) * sd / delta) ** 2
