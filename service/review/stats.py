"""Agreement and threshold statistics for calibrating automated judges against people.

Pure functions on lists of labels and scores; no database. Intervals are 95%
normal-approximation intervals with the large-sample variances named at each
function (checked against a bootstrap in the tests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low


@dataclass(frozen=True)
class Kappa:
    n: int
    observed: float  # Po: share of items where both raters agree
    chance: float  # Pe: agreement expected if each rated at random with their own marginals
    kappa: float | None  # None when Pe == 1 (both raters constant): agreement beyond chance is undefined
    interval: Interval | None


@dataclass(frozen=True)
class Confusion:
    """2x2 table: rows = rater A (pass, fail), columns = rater B (pass, fail)."""

    both_pass: int
    a_pass_b_fail: int
    a_fail_b_pass: int
    both_fail: int

    @property
    def n(self) -> int:
        return self.both_pass + self.a_pass_b_fail + self.a_fail_b_pass + self.both_fail

    @classmethod
    def of(cls, a: Sequence[bool], b: Sequence[bool]) -> Confusion:
        if len(a) != len(b):
            raise ValueError(f"raters labelled different numbers of items ({len(a)} vs {len(b)})")
        pp = sum(1 for x, y in zip(a, b, strict=True) if x and y)
        pf = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
        fp = sum(1 for x, y in zip(a, b, strict=True) if not x and y)
        return cls(pp, pf, fp, len(a) - pp - pf - fp)


def cohen_kappa(table: Confusion) -> Kappa | None:
    """Cohen's kappa with the Fleiss-Cohen-Everitt (1969) large-sample standard error; None when n = 0."""
    n = table.n
    if n == 0:
        return None
    p = [[table.both_pass / n, table.a_pass_b_fail / n], [table.a_fail_b_pass / n, table.both_fail / n]]
    rows = [p[0][0] + p[0][1], p[1][0] + p[1][1]]
    cols = [p[0][0] + p[1][0], p[0][1] + p[1][1]]
    po = p[0][0] + p[1][1]
    pe = rows[0] * cols[0] + rows[1] * cols[1]
    if pe >= 1.0:
        return Kappa(n, po, pe, None, None)
    kappa = (po - pe) / (1 - pe)
    diagonal = sum(p[i][i] * ((1 - pe) - (rows[i] + cols[i]) * (1 - po)) ** 2 for i in range(2))
    off = (1 - po) ** 2 * sum(p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(2) for j in range(2) if i != j)
    correction = (po * pe - 2 * pe + po) ** 2
    variance = max(0.0, (diagonal + off - correction) / (n * (1 - pe) ** 4))
    half = Z95 * math.sqrt(variance)
    return Kappa(n, po, pe, kappa, Interval(max(-1.0, kappa - half), min(1.0, kappa + half)))


@dataclass(frozen=True)
class BalancedAccuracy:
    n_positive: int
    n_negative: int
    sensitivity: float | None  # TPR: faithful answers the judge passes
    specificity: float | None  # TNR: unfaithful answers the judge fails
    value: float | None  # (TPR + TNR) / 2; None without both classes
    interval: Interval | None


def balanced_accuracy(truth: Sequence[bool], predicted: Sequence[bool]) -> BalancedAccuracy:
    """Balanced accuracy; its variance is (TPR(1-TPR)/n+ + TNR(1-TNR)/n-)/4 (independent binomials)."""
    pos = [p for t, p in zip(truth, predicted, strict=True) if t]
    neg = [p for t, p in zip(truth, predicted, strict=True) if not t]
    tpr = sum(pos) / len(pos) if pos else None
    tnr = sum(1 for p in neg if not p) / len(neg) if neg else None
    if tpr is None or tnr is None:
        return BalancedAccuracy(len(pos), len(neg), tpr, tnr, None, None)
    value = (tpr + tnr) / 2
    # A class with 0% or 100% has zero binomial variance; the +0.5 continuity keeps the interval honest.
    var_pos = max(tpr * (1 - tpr), 0.25 / (len(pos) + 1)) / len(pos)
    var_neg = max(tnr * (1 - tnr), 0.25 / (len(neg) + 1)) / len(neg)
    half = Z95 * math.sqrt((var_pos + var_neg) / 4)
    return BalancedAccuracy(len(pos), len(neg), tpr, tnr, value, Interval(max(0.0, value - half), min(1.0, value + half)))


@dataclass(frozen=True)
class RocPoint:
    threshold: float  # predict "pass" when score >= threshold
    tpr: float
    fpr: float

    @property
    def youden_j(self) -> float:
        return self.tpr - self.fpr  # = 2 * balanced accuracy - 1


def roc(scores: Sequence[float], truth: Sequence[bool]) -> list[RocPoint]:
    """ROC points at every distinct score, from the strictest threshold to the loosest."""
    n_pos = sum(1 for t in truth if t)
    n_neg = len(truth) - n_pos
    if n_pos == 0 or n_neg == 0:
        return []
    ordered = sorted(zip(scores, truth, strict=True), key=lambda st: -st[0])
    points = [RocPoint(math.inf, 0.0, 0.0)]
    tp = fp = 0
    for i, (score, positive) in enumerate(ordered):
        tp += positive
        fp += not positive
        if i + 1 == len(ordered) or ordered[i + 1][0] != score:
            points.append(RocPoint(score, tp / n_pos, fp / n_neg))
    return points


def auc(points: Sequence[RocPoint]) -> float | None:
    if not points:
        return None
    return sum((b.fpr - a.fpr) * (a.tpr + b.tpr) / 2 for a, b in zip(points, points[1:], strict=False))


def youden_threshold(scores: Sequence[float], truth: Sequence[bool]) -> float | None:
    """The threshold maximising Youden's J (ties: the higher threshold, the stricter judge)."""
    best: RocPoint | None = None
    for point in roc(scores, truth):
        if math.isfinite(point.threshold) and (best is None or point.youden_j > best.youden_j):
            best = point
    return best.threshold if best else None


@dataclass(frozen=True)
class RateEstimate:
    value: float | None
    interval: Interval | None
    n: int


def prediction_powered_rate(unlabelled_n: int, unlabelled_positive: int,
                            labelled: Sequence[tuple[bool, bool]]) -> RateEstimate:
    """Prediction-powered estimate of a rate (Angelopoulos et al., 2023).

    θ = mean of the judge's verdict f over every scored item + mean of (human - f)
    over the labelled ones (the rectifier, which removes the judge's bias). Its
    variance is Var(f)/N + Var(y - f)/n. `labelled` holds (human, judge) pairs of
    a uniform random subset of the scored items.
    """
    n = len(labelled)
    if unlabelled_n == 0 or n < 2:
        return RateEstimate(None, None, n)
    f_mean = unlabelled_positive / unlabelled_n
    rectifiers = [int(y) - int(f) for y, f in labelled]
    r_mean = sum(rectifiers) / n
    r_var = sum((r - r_mean) ** 2 for r in rectifiers) / (n - 1)
    value = f_mean + r_mean
    half = Z95 * math.sqrt(f_mean * (1 - f_mean) / unlabelled_n + r_var / n)
    clipped = min(1.0, max(0.0, value))
    return RateEstimate(clipped, Interval(max(0.0, value - half), min(1.0, value + half)), n)


def weighted_rate(labelled: Sequence[tuple[bool, float]]) -> RateEstimate:
    """A population rate from items sampled with unequal probabilities: Hajek's ratio estimator.

    Each (label, π) weighs 1/π, so an oversampled stratum (thumbs-down, low
    confidence) counts for the traffic it stands for. Variance by
    linearisation: Σ w²(y − θ)² / (Σ w)², treating items as drawn independently.
    """
    n = len(labelled)
    if n < 2:
        return RateEstimate(None, None, n)
    weights = [1.0 / p for _, p in labelled]
    total = sum(weights)
    value = sum(w for (y, _), w in zip(labelled, weights, strict=True) if y) / total
    variance = sum(w * w * (int(y) - value) ** 2 for (y, _), w in zip(labelled, weights, strict=True)) / total**2
    half = Z95 * math.sqrt(variance)
    return RateEstimate(value, Interval(max(0.0, value - half), min(1.0, value + half)), n)


def wilson(positive: int, n: int) -> Interval | None:
    if n == 0:
        return None
    p = positive / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return Interval(max(0.0, centre - half), min(1.0, centre + half))
