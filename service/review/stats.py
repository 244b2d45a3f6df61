"""Agreement and threshold statistics for calibrating automated judges against people.

Pure functions on lists of labels and scores; no database. Intervals of the
reviewed mix are 95% normal-approximation intervals with the large-sample
variances named at each function (checked against a bootstrap in the tests);
figures re-weighted to the population (1/π weights) carry a stratified
weighted-bootstrap interval (the end of this module).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from service.contracts.stats import Z95, wilson_interval


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
    off = (1 - po) ** 2 * sum(
        p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(2) for j in range(2) if i != j
    )
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
    return BalancedAccuracy(
        len(pos), len(neg), tpr, tnr, value, Interval(max(0.0, value - half), min(1.0, value + half))
    )


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


def prediction_powered_rate(
    unlabelled_n: int, unlabelled_positive: int, labelled: Sequence[tuple[bool, bool]]
) -> RateEstimate:
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
    variance = (
        sum(w * w * (int(y) - value) ** 2 for (y, _), w in zip(labelled, weights, strict=True)) / total**2
    )
    half = Z95 * math.sqrt(variance)
    return RateEstimate(value, Interval(max(0.0, value - half), min(1.0, value + half)), n)


def wilson(positive: int, n: int) -> Interval | None:
    """The 95% Wilson interval of positive / n; None with nothing to count."""
    return Interval(*wilson_interval(positive, n)) if n > 0 else None


# -- re-weighted to the population (inclusion probabilities) ----------------------------------------------

BOOTSTRAP_REPLICATES = 1000
_BLOCK = 100  # replicates drawn at once (memory: BLOCK × n)


@dataclass(frozen=True)
class Weighted:
    """A figure of the population the reviewed items were drawn from: each item weighs 1/π.

    Horvitz–Thompson totals per cell, divided by the total weight (Hajek), so a
    stratum sampled at 20% counts for five times its size and one at 1% for a
    hundred. The interval is a stratified weighted bootstrap (items resampled
    within their stratum, each replicate re-weighted the same way), 2.5th and
    97.5th percentiles. `effective_n` is Kish's (Σw)²/Σw²: how many items of a
    simple random sample the weighted ones are worth.
    """

    value: float | None
    interval: Interval | None
    n: int
    effective_n: float


def _cells(truth: Sequence[bool], predicted: Sequence[bool]) -> np.ndarray:
    """The confusion cell of each item: 0 both pass, 1 A pass/B fail, 2 A fail/B pass, 3 both fail."""
    a = np.asarray(truth, dtype=bool)
    b = np.asarray(predicted, dtype=bool)
    return (2 * (~a) + (~b)).astype(np.int8)


def _cell_weights(cells: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σw per cell, on the last axis: (..., 4)."""
    return np.stack([np.where(cells == k, weights, 0.0).sum(axis=-1) for k in range(4)], axis=-1)


def _kappa_of(t: np.ndarray) -> np.ndarray:
    """Cohen's kappa of weighted 2x2 tables (..., 4); NaN where undefined."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p = t / t.sum(axis=-1, keepdims=True)
        po = p[..., 0] + p[..., 3]
        rows = (p[..., 0] + p[..., 1], p[..., 2] + p[..., 3])
        cols = (p[..., 0] + p[..., 2], p[..., 1] + p[..., 3])
        pe = rows[0] * cols[0] + rows[1] * cols[1]
        return np.where(pe < 1.0 - 1e-12, (po - pe) / (1.0 - pe), np.nan)


def _balanced_accuracy_of(t: np.ndarray) -> np.ndarray:
    """(TPR + TNR) / 2 of weighted tables, rows = truth; NaN without both classes."""
    with np.errstate(invalid="ignore", divide="ignore"):
        tpr = t[..., 0] / (t[..., 0] + t[..., 1])
        tnr = t[..., 3] / (t[..., 2] + t[..., 3])
        return (tpr + tnr) / 2


def _rate_of(t: np.ndarray) -> np.ndarray:
    """Share of the weight on positive items (cell 0 when `predicted` is the label itself)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return t[..., 0] / t.sum(axis=-1)


def _bootstrap(
    cells: np.ndarray, weights: np.ndarray, strata: np.ndarray, statistic: Any, replicates: int, seed: int
) -> Interval | None:
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(strata == s) for s in np.unique(strata)]
    values: list[np.ndarray] = []
    for start in range(0, replicates, _BLOCK):
        size = min(_BLOCK, replicates - start)
        idx = np.concatenate([g[rng.integers(0, len(g), (size, len(g)))] for g in groups], axis=1)
        values.append(statistic(_cell_weights(cells[idx], weights[idx])))
    found = np.concatenate(values)
    found = found[np.isfinite(found)]
    if len(found) < 0.9 * replicates:  # most replicates lack a class: no honest interval
        return None
    low, high = np.percentile(found, [2.5, 97.5])
    return Interval(float(low), float(high))


def _weighted(
    statistic: Any,
    truth: Sequence[bool],
    predicted: Sequence[bool],
    weights: Sequence[float],
    strata: Sequence[str] | None = None,
    replicates: int = BOOTSTRAP_REPLICATES,
    seed: int = 0,
) -> Weighted:
    """`statistic` of the 2x2 table of Σ 1/π per cell, with its stratified weighted-bootstrap interval."""
    n = len(truth)
    if len(predicted) != n or len(weights) != n or (strata is not None and len(strata) != n):
        raise ValueError("truth, predicted, weights and strata must have one entry per item")
    if n == 0:
        return Weighted(None, None, 0, 0.0)
    w = np.asarray(weights, dtype=float)
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("weights must be positive and finite (1/π with 0 < π <= 1)")
    cells = _cells(truth, predicted)
    value = float(statistic(_cell_weights(cells, w)))
    effective = float(w.sum() ** 2 / (w * w).sum())
    if not math.isfinite(value):
        return Weighted(None, None, n, effective)
    groups = np.asarray(strata if strata is not None else [""] * n)
    return Weighted(value, _bootstrap(cells, w, groups, statistic, replicates, seed), n, effective)


# Cohen's kappa of the population: the 2x2 table of Σ 1/π per cell.
weighted_kappa = partial(_weighted, _kappa_of)
# Balanced accuracy of the population: TPR and TNR as shares of Σ 1/π.
weighted_balanced_accuracy = partial(_weighted, _balanced_accuracy_of)


def weighted_share(
    labels: Sequence[bool],
    weights: Sequence[float],
    strata: Sequence[str] | None = None,
    replicates: int = BOOTSTRAP_REPLICATES,
    seed: int = 0,
) -> Weighted:
    """The population share of True labels (Hajek), with the stratified weighted-bootstrap interval."""
    return _weighted(_rate_of, labels, labels, weights, strata, replicates, seed)
