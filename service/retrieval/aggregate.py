"""Means of the retrieval metrics over labelled traces, with percentile bootstrap intervals.

Per group (tenant, intent, variant, release) and per metric: the mean over
the traces that have data for it (gold, and the stage's list), the labelled
n beside it, and a percentile bootstrap interval (default 95%, 1,000
resamples). Below a minimum n (default 30) there is no interval: the answer
is "label more", since a bootstrap of a handful of traces is too narrow.

The resamples are drawn once per group and reused for every metric: each is
a vector of counts (how often each trace was drawn, a multinomial draw of n
out of n: the ordinary bootstrap), so all metrics' resampled means come out
of one matrix product (counts x metric values). A trace without data for a
metric (NaN) is out of that metric's numerator and denominator in every
resample, so the resampled mean is the mean over the resampled traces that
have data, as the point estimate is over the sample.

Seeded: a group's resamples depend on the seed and the group's key only, so
a report is reproducible and adding a group does not move another's
interval.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_MIN_N = 30
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0
LABEL_MORE = "label more"
_CHUNK = 32  # resamples per matrix product: a (32 x n) count matrix stays small


@dataclass(frozen=True)
class Estimate:
    """One metric in one group. `low`/`high` are None below the minimum n (`status` then says so)."""

    mean: float | None  # None: no trace has data for it
    n: int
    low: float | None = None
    high: float | None = None

    @property
    def status(self) -> str:
        if self.n == 0:
            return "no data"
        return "ok" if self.low is not None else LABEL_MORE


@dataclass(frozen=True)
class BootstrapOptions:
    resamples: int = DEFAULT_RESAMPLES
    min_n: int = DEFAULT_MIN_N
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED


DEFAULT_OPTIONS = BootstrapOptions()


def group_seed(seed: int, key: Sequence[str]) -> np.random.SeedSequence:
    return np.random.SeedSequence([seed, zlib.crc32(json.dumps(list(key)).encode())])


def resample_counts(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """(resamples x n) float32 counts: row b holds how often each of the n traces was drawn in resample b."""
    counts = np.empty((resamples, n), np.float32)
    for b in range(resamples):
        counts[b] = np.bincount(rng.integers(0, n, n, dtype=np.int32), minlength=n)
    return counts


def bootstrap_means(
    values: np.ndarray, rng: np.random.Generator, resamples: int = DEFAULT_RESAMPLES
) -> np.ndarray:
    """(resamples x metrics) resampled means of `values` (traces x metrics, NaN: no data).

    One set of resampled indices serves every column; chunked so memory stays
    at (_CHUNK x n) counts whatever n is.
    """
    n, m = values.shape
    has = ~np.isnan(values)
    data = np.where(has, values, 0.0).astype(np.float32)
    # Columns with the same missing pattern share a denominator: [data | masks] in one product.
    patterns: dict[bytes, int] = {}
    which = np.array([patterns.setdefault(np.packbits(has[:, j]).tobytes(), len(patterns)) for j in range(m)])
    first = [int(np.flatnonzero(which == p)[0]) for p in range(len(patterns))]
    stacked = np.concatenate([data, has[:, first].astype(np.float32)], axis=1)
    out = np.empty((resamples, m))
    for start in range(0, resamples, _CHUNK):
        b = min(_CHUNK, resamples - start)
        sums = (resample_counts(rng, n, b) @ stacked).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + b] = sums[:, :m] / sums[:, m:][:, which]
    return out


def estimate_group(
    values: np.ndarray, key: Sequence[str], options: BootstrapOptions = DEFAULT_OPTIONS
) -> list[Estimate]:
    """An Estimate per column of `values` (traces x metrics) for the group named by `key`."""
    has = ~np.isnan(values)
    n_per = has.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(has, values, 0.0).sum(axis=0) / n_per
    intervals: dict[int, tuple[float, float]] = {}
    enough = [j for j in range(values.shape[1]) if n_per[j] >= options.min_n]
    if enough and options.resamples > 0:
        rng = np.random.default_rng(group_seed(options.seed, key))
        boot = bootstrap_means(values, rng, options.resamples)
        tail = (1 - options.confidence) / 2
        qs = np.nanquantile(boot[:, enough], [tail, 1 - tail], axis=0)
        intervals = {j: (float(qs[0, i]), float(qs[1, i])) for i, j in enumerate(enough)}
    estimates = []
    for j in range(values.shape[1]):
        n = int(n_per[j])
        mean = float(means[j]) if n else None
        low, high = intervals.get(j, (None, None))
        estimates.append(Estimate(mean, n, low, high))
    return estimates
