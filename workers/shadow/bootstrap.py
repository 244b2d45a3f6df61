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
    p95_max_pairs: int = 2_000  # the p95 ratio resamples the most recent pairs only (see p95_ratio_interval)


def _percentile_interval(stats: np.ndarray, level: float) -> tuple[float, float]:
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return (float("nan"), float("nan"))
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(stats, [tail, 100.0 - tail])
    return float(lo), float(hi)


def mean_difference_intervals(
    diffs: np.ndarray, settings: BootstrapSettings, rng: np.random.Generator
) -> np.ndarray:
    """Percentile intervals of the mean of each column of diffs (n pairs x M metrics; NaN = metric absent).

    Returns an (M, 2) array; a column with no pair gives NaN bounds.
    """
    n, m = diffs.shape
    if n == 0:
        return np.full((m, 2), np.nan)
    if n <= settings.exact_max_pairs:
        means = _exact_resampled_means(diffs, settings.resamples, rng)
    else:
        shared: dict[int, np.ndarray] = {}  # rank-bin counts by n: drawn once, reused by every metric
        means = np.stack(
            [_binned_resampled_means(diffs[:, j], settings.resamples, rng, shared) for j in range(m)], axis=1
        )
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
                out[start : start + rows, j] = filled[idx, j].mean(axis=1)
            else:
                counts = valid[idx, j].sum(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[start : start + rows, j] = filled[idx, j].sum(axis=1) / counts
    return out


def _rank_cuts(n: int) -> np.ndarray:
    return np.unique(np.round(_TAIL_EDGES * n).astype(np.int64))


def _bins(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(bin means, bin within-variances, bin counts, by rank) of one metric's differences.

    Bins by rank have sizes that depend on n only, so metrics with the same n
    can share one multinomial draw of their counts (each metric's own
    bootstrap distribution is exact in its counts; only the cross-metric
    correlation of the resamples is not kept, and no statistic here uses it).
    """
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size <= _TAIL_EDGES.size - 1:
        return distinct, np.zeros(distinct.size), counts, False
    ordered = np.sort(values)
    cuts = _rank_cuts(ordered.size)
    sums = np.add.reduceat(ordered, cuts[:-1])
    squares = np.add.reduceat(ordered * ordered, cuts[:-1])
    sizes = np.diff(cuts)
    means = sums / sizes
    return means, np.maximum(squares / sizes - means * means, 0.0), sizes, True


def _binned_resampled_means(
    column: np.ndarray, resamples: int, rng: np.random.Generator, shared: dict[int, np.ndarray]
) -> np.ndarray:
    values = column[~np.isnan(column)]
    if values.size == 0:
        return np.full(resamples, np.nan)
    means, variances, sizes, by_rank = _bins(values)
    n = values.size
    if by_rank and n in shared:
        picks = shared[n]
    else:
        # float before the products: an integer matrix product does not use BLAS and is ~10x slower
        picks = rng.multinomial(n, sizes / n, size=resamples).astype(np.float64)
        if by_rank:
            shared[n] = picks
    resampled = picks @ means
    if variances.any():  # exact distinct values (binary outcomes) have no spread inside a bin
        resampled += np.sqrt(picks @ variances) * rng.standard_normal(resamples)
    return resampled / n


def p95_ratio_interval(
    production: np.ndarray, candidate: np.ndarray, settings: BootstrapSettings, rng: np.random.Generator
) -> tuple[float, float, float]:
    """(point, lower, upper) of p95(candidate) / p95(production) over the same resampled pairs.

    Poisson bootstrap (each pair drawn Poisson(1) times; Hanley & MacGibbon
    2006, Chamandy et al. 2012) on the most recent p95_max_pairs pairs (arrival
    order). Only the pairs in the top 10% of either variant can decide a
    resampled p95 (at 2,000 pairs the resampled 95th rank moves by ~0.5%), so only their weights are drawn one by one; the others
    count as one Poisson total. p95 is the inverted-CDF quantile (the smallest
    value with at least 95% of the weight at or below it).
    """
    both = ~(np.isnan(production) | np.isnan(candidate))
    prod = production[both][-settings.p95_max_pairs :]
    cand = candidate[both][-settings.p95_max_pairs :]
    if prod.size < 20:
        return (float("nan"), float("nan"), float("nan"))
    tail = (prod >= np.quantile(prod, 0.90)) | (cand >= np.quantile(cand, 0.90))
    weights = rng.poisson(1.0, (settings.resamples, int(tail.sum())))
    total = weights.sum(axis=1) + rng.poisson(float((~tail).sum()), settings.resamples)
    ones = np.ones((1, int(tail.sum())))
    point_total = np.array([float(prod.size)])
    point_ratio = _weighted_p95(cand[tail], ones, point_total) / _weighted_p95(prod[tail], ones, point_total)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = _weighted_p95(cand[tail], weights, total) / _weighted_p95(prod[tail], weights, total)
    lo, hi = _percentile_interval(ratios, settings.level)
    return float(point_ratio[0]), lo, hi


def _weighted_p95(tail_values: np.ndarray, weights: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Per resample: the value where the weight counted from the top first reaches 5% of the total."""
    order = np.argsort(tail_values)[::-1]
    from_top = np.cumsum(weights[:, order], axis=1)
    reached = from_top >= 0.05 * total[:, None]
    first = np.where(reached.any(axis=1), reached.argmax(axis=1), order.size - 1)
    return tail_values[order][first]
