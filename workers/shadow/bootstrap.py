"""Paired bootstrap intervals, vectorised and seeded (see docs/shadow.md, "Bootstrap").

Two regimes, chosen by the number of pairs n in the subset:

* n <= exact_max_pairs: the textbook paired bootstrap. One B x n matrix of
  resampled pair indices is drawn per subset and reused for every metric, so
  metrics see the same resamples (and the same seed gives the same interval).
* larger n: drawing B x n indices (10^9 for 100k pairs) is too slow, so each
  metric's paired differences are reduced to at most ~10 bins (exact distinct
  values when there are that few -- binary outcomes are exactly three: loss,
  tie, win -- else quantile bins with finer tails) and the bootstrap draws how
  many pairs of each bin a resample picks: Multinomial(n, bin shares), which
  is exactly the distribution the index bootstrap induces on bin counts. The
  spread of values inside a bin is added as a normal term with the bin's
  variance, so the first two moments of every resampled mean are exact and
  the tail bins keep the skew that heavy tails give a bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Quantile edges of the bins used above exact_max_pairs: fine in the tails,
# where a few extreme pairs decide how skewed the resampled mean is.
_TAIL_EDGES = np.array([0.0, 0.001, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 0.999, 1.0])
_CHUNK = 1_000  # resamples per block of indices: bounds memory to _CHUNK x n


@dataclass(frozen=True)
class BootstrapSettings:
    resamples: int = 10_000
    level: float = 0.95
    seed: int = 7
    exact_max_pairs: int = 2_000


def _percentile_interval(stats: np.ndarray, level: float) -> tuple[float, float]:
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return (float("nan"), float("nan"))
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(stats, [tail, 100.0 - tail])
    return float(lo), float(hi)


def mean_difference_intervals(diffs: np.ndarray, settings: BootstrapSettings,
                              rng: np.random.Generator) -> np.ndarray:
    """Percentile intervals of the mean of each column of diffs (n pairs x M metrics; NaN = metric absent).

    Returns an (M, 2) array; a column with no pair gives NaN bounds.
    """
    n, m = diffs.shape
    if n == 0:
        return np.full((m, 2), np.nan)
    if n <= settings.exact_max_pairs:
        means = _exact_resampled_means(diffs, settings.resamples, rng)
    else:
        means = np.stack([_binned_resampled_means(diffs[:, j], settings.resamples, rng) for j in range(m)], axis=1)
    return np.array([_percentile_interval(means[:, j], settings.level) for j in range(m)])


def _exact_resampled_means(diffs: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    n, m = diffs.shape
    valid = ~np.isnan(diffs)
    filled = np.where(valid, diffs, 0.0)
    every_valid = valid.all(axis=0)
    out = np.empty((resamples, m))
    for start in range(0, resamples, _CHUNK):
        rows = min(_CHUNK, resamples - start)
        idx = rng.integers(0, n, (rows, n))  # drawn once, reused by every metric
        for j in range(m):
            if every_valid[j]:
                out[start:start + rows, j] = filled[idx, j].mean(axis=1)
            else:
                counts = valid[idx, j].sum(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[start:start + rows, j] = filled[idx, j].sum(axis=1) / counts
    return out


def _bins(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bin means, bin within-variances, bin counts) of one metric's differences."""
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size <= _TAIL_EDGES.size - 1:
        return distinct, np.zeros(distinct.size), counts
    ordered = np.sort(values)
    cuts = np.unique(np.round(_TAIL_EDGES * ordered.size).astype(np.int64))
    sums = np.add.reduceat(ordered, cuts[:-1])
    squares = np.add.reduceat(ordered * ordered, cuts[:-1])
    sizes = np.diff(cuts)
    means = sums / sizes
    return means, np.maximum(squares / sizes - means * means, 0.0), sizes


def _binned_resampled_means(column: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    values = column[~np.isnan(column)]
    if values.size == 0:
        return np.full(resamples, np.nan)
    means, variances, sizes = _bins(values)
    n = values.size
    picks = rng.multinomial(n, sizes / n, size=resamples)
    spread = np.sqrt(picks @ variances) * rng.standard_normal(resamples)
    return (picks @ means + spread) / n


def p95_ratio_interval(production: np.ndarray, candidate: np.ndarray, settings: BootstrapSettings,
                       rng: np.random.Generator) -> tuple[float, float, float]:
    """(point, lower, upper) of p95(candidate) / p95(production) over the same resampled pairs.

    Uses the most recent exact_max_pairs pairs at most (the arrays are in
    arrival order): a quantile has no small sufficient statistic, and the
    index bootstrap of a larger window would cost B x n.
    """
    both = ~(np.isnan(production) | np.isnan(candidate))
    prod = production[both][-settings.exact_max_pairs:]
    cand = candidate[both][-settings.exact_max_pairs:]
    if prod.size == 0 or np.percentile(prod, 95) <= 0:
        return (float("nan"), float("nan"), float("nan"))
    point = float(np.percentile(cand, 95) / np.percentile(prod, 95))
    ratios = np.empty(settings.resamples)
    for start in range(0, settings.resamples, _CHUNK):
        rows = min(_CHUNK, settings.resamples - start)
        idx = rng.integers(0, prod.size, (rows, prod.size))
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios[start:start + rows] = np.percentile(cand[idx], 95, axis=1) / np.percentile(prod[idx], 95, axis=1)
    lo, hi = _percentile_interval(ratios, settings.level)
    return point, lo, hi
