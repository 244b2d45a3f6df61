"""The two-sample test: unbiased MMD² with an RBF kernel and a permutation p-value.

Reference X (n rows) and current Y (m rows) are pooled into Z = [X; Y] and one
kernel matrix K = exp(-|z_i - z_j|² / (2σ²)) is computed, σ from the median
heuristic on the reference alone (so the bandwidth does not move with the
traffic being tested). The statistic is the U-statistic of Gretton et al.:

    MMD²_u = Σ_{i≠j∈X} k / n(n-1) + Σ_{i≠j∈Y} k / m(m-1) - 2 Σ_{i∈X, j∈Y} k / nm

Permutations reuse K. The statistic does not change when K_ij (i≠j) gets
f(i) + f(j) added for any f: each of the three sums picks up the same shift
and they cancel. Choosing f so that every off-diagonal row of K sums to zero
(double centring) leaves, for a split given by the 0/1 indicator a of the
reference group, exactly

    MMD²_u(a) = c · aᵀ K_c a,    c = 1/n(n-1) + 1/m(m-1) + 2/nm,

so B permutations are B quadratic forms: one (B × N)·(N × N) matrix product
over the centred kernel plus a row-wise dot product. Centring also keeps the
entries near zero, which is what makes float32 accurate enough for the
permutation distribution (the reported statistic itself is float64).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

# Permutations are done in chunks so memory stays O(chunk · N), not O(B · N).
PERMUTATION_CHUNK = 512


@dataclass(frozen=True)
class MMDResult:
    mmd2: float
    p_value: float  # (1 + #{permuted ≥ observed}) / (1 + B): never 0
    threshold: float  # the MMD² above which the test flags drift at alpha
    drift: bool  # p_value <= alpha
    sigma: float  # RBF bandwidth used (median heuristic on the reference)
    permutations: int
    n_reference: int
    n_current: int


def check_alpha_permutations(alpha: float, permutations: int) -> None:
    """With B permutations the smallest p-value is 1/(B+1): alpha below it can never fire."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, got {permutations}")
    if alpha * (permutations + 1) < 1.0:
        raise ValueError(
            f"permutations={permutations} cannot reach alpha={alpha}: the smallest p-value is "
            f"1/(permutations+1); use permutations >= {int(np.ceil(1.0 / alpha)) - 1}"
        )


def squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a_i - b_j|² as a float64 matrix, computed in place to avoid N² temporaries.

    The inner products run in float32 when both inputs are float32 (embeddings
    as stored; half the time of float64, as alibi-detect does) and in float64
    otherwise; the norms are always float64.
    """
    work = np.dtype(np.float32) if a.dtype == np.float32 and b.dtype == np.float32 else np.dtype(np.float64)
    a_work: np.ndarray = np.asarray(a, dtype=work)
    b_work: np.ndarray = np.asarray(b, dtype=work)
    d: np.ndarray = np.asarray(a_work @ b_work.T, dtype=np.float64)
    d *= -2.0
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    d += np.einsum("ij,ij->i", a64, a64)[:, None]
    d += np.einsum("ij,ij->i", b64, b64)[None, :]
    np.maximum(d, 0.0, out=d)  # rounding can leave tiny negatives
    return d


def median_sigma(reference_sq_distances: np.ndarray) -> float:
    """σ with 2σ² = median of the off-diagonal squared distances within the reference."""
    n = reference_sq_distances.shape[0]
    if n < 2:
        raise ValueError(f"the reference needs at least 2 rows for a bandwidth, got {n}")
    upper = reference_sq_distances[np.triu_indices(n, k=1)]
    med = float(np.median(upper))
    if med <= 0.0:
        # All reference rows identical: any bandwidth gives the same kernel within X;
        # fall back to the mean so a current window that differs still registers.
        med = float(upper.mean()) or 1.0
    return float(np.sqrt(med / 2.0))


def rbf_kernel(sq_distances: np.ndarray, sigma: float, *, in_place: bool = False) -> np.ndarray:
    """exp(-d² / 2σ²); with in_place the float64 distance matrix becomes the kernel."""
    if not sigma > 0.0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    k = sq_distances if in_place else np.array(sq_distances, dtype=np.float64, copy=True)
    k *= -1.0 / (2.0 * sigma * sigma)
    np.exp(k, out=k)
    return k


def mmd2_unbiased(kernel: np.ndarray, n_reference: int) -> float:
    """MMD²_u from a pooled kernel matrix whose first n_reference rows are the reference."""
    n = n_reference
    m = kernel.shape[0] - n
    if n < 2 or m < 2:
        raise ValueError(f"each window needs at least 2 rows, got reference={n}, current={m}")
    k_xx = kernel[:n, :n]
    k_yy = kernel[n:, n:]
    sum_xx = k_xx.sum() - np.trace(k_xx)
    sum_yy = k_yy.sum() - np.trace(k_yy)
    sum_xy = kernel[:n, n:].sum()
    return float(sum_xx / (n * (n - 1)) + sum_yy / (m * (m - 1)) - 2.0 * sum_xy / (n * m))


def centred_kernel(kernel: np.ndarray) -> np.ndarray:
    """Zero diagonal, then subtract f(i) + f(j) off the diagonal so that every row sums to 0."""
    size = kernel.shape[0]
    k0 = np.array(kernel, dtype=np.float64, copy=True)
    np.fill_diagonal(k0, 0.0)
    row = k0.sum(axis=1)
    f = (row - row.sum() / (2.0 * (size - 1))) / (size - 2)
    k0 -= f[:, None]
    k0 -= f[None, :]
    np.fill_diagonal(k0, 0.0)
    return k0


def split_constant(n: int, m: int) -> float:
    return 1.0 / (n * (n - 1)) + 1.0 / (m * (m - 1)) + 2.0 / (n * m)


def permuted_mmd2(
    kernel: np.ndarray, n_reference: int, permutations: int, rng: np.random.Generator
) -> np.ndarray:
    """MMD²_u of `permutations` random relabellings of the pooled sample, sharing one kernel."""
    size = kernel.shape[0]
    n, m = n_reference, size - n_reference
    if n < 2 or m < 2:
        raise ValueError(f"each window needs at least 2 rows, got reference={n}, current={m}")
    centred = centred_kernel(kernel).astype(np.float32)
    out = np.empty(permutations, dtype=np.float64)
    labels = np.empty((min(PERMUTATION_CHUNK, permutations), size), dtype=np.float32)
    for start in range(0, permutations, PERMUTATION_CHUNK):
        b = min(PERMUTATION_CHUNK, permutations - start)
        labels[:b] = 0.0
        for row in labels[:b]:  # a uniformly random reference group of size n
            row[rng.permutation(size)[:n]] = 1.0
        quad = np.einsum("ij,ij->i", labels[:b] @ centred, labels[:b], dtype=np.float64)
        out[start : start + b] = quad
    out *= split_constant(n, m)
    return out


def permutation_threshold(permuted: np.ndarray, alpha: float) -> float:
    """The largest permuted value that an observed statistic must exceed for p <= alpha."""
    allowed = int(np.floor(alpha * (len(permuted) + 1) + 1e-9)) - 1  # permuted values >= observed allowed
    if allowed < 0:
        return float("inf")
    return float(np.sort(permuted)[::-1][allowed])


class MMDInput(NamedTuple):
    """What mmd_test hands its backend."""

    reference: np.ndarray
    current: np.ndarray
    alpha: float
    permutations: int
    rng: np.random.Generator
    sigma: float | None  # None: the median heuristic on the reference


class Statistic(NamedTuple):
    """What a backend computes for the test (see mmd_test)."""

    mmd2: float
    exceed: int  # permuted statistics at or above the observed one
    threshold: float
    sigma: float  # the bandwidth used


Backend = Callable[[MMDInput], Statistic]


def permutation_statistic(given: MMDInput) -> Statistic:
    """ragmon's own: one pooled kernel matrix, its permutations as one matrix product (the top of this module)."""
    reference, current = given.reference, given.current
    if reference.ndim != 2 or current.ndim != 2 or reference.shape[1] != current.shape[1]:
        raise ValueError(
            f"reference and current must be 2-D with the same width, got {reference.shape} and {current.shape}"
        )
    n = reference.shape[0]
    pooled = np.concatenate([reference, current], axis=0)
    sq = squared_distances(pooled, pooled)
    bandwidth = median_sigma(sq[:n, :n]) if given.sigma is None else float(given.sigma)
    kernel = rbf_kernel(sq, bandwidth, in_place=True)
    observed = mmd2_unbiased(kernel, n)
    permuted = permuted_mmd2(kernel, n, given.permutations, given.rng)
    exceed = int(np.count_nonzero(permuted >= observed))
    return Statistic(observed, exceed, permutation_threshold(permuted, given.alpha), bandwidth)


def mmd_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    alpha: float,
    permutations: int,
    rng: np.random.Generator,
    sigma: float | None = None,
    statistic: Backend = permutation_statistic,
) -> MMDResult:
    """Is `current` drawn from the distribution of `reference`? (rows are embeddings).

    `statistic` computes it: ragmon's own, or the optional alibi-detect backend's
    (workers/drift/alibi_backend.py); either way the p-value carries the +1 correction, so
    a result means the same whichever computed it."""
    check_alpha_permutations(alpha, permutations)
    found = statistic(MMDInput(reference, current, alpha, permutations, rng, sigma))
    p_value = (1.0 + found.exceed) / (1.0 + permutations)
    return MMDResult(
        mmd2=found.mmd2,
        p_value=p_value,
        threshold=found.threshold,
        drift=p_value <= alpha,
        sigma=found.sigma,
        permutations=permutations,
        n_reference=len(reference),
        n_current=len(current),
    )
