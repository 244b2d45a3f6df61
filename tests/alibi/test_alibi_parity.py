"""ragmon's MMD test against alibi-detect's MMDDrift(backend='pytorch'), same data and bandwidth.

Runs in the alibi virtualenv only (alibi-detect pins numpy<2 and transformers<5):

    bash tests/alibi/setup_venv.sh
    PYTHONPATH=. .venv-alibi/bin/python -m pytest --confcutdir=tests/alibi tests/alibi

In the main virtualenv alibi-detect is absent and the module is skipped.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from alibi_mmd import alibi_mmd, load_alibi  # noqa: E402

from workers.drift.alibi_backend import alibi_statistic  # noqa: E402
from workers.drift.mmd import (  # noqa: E402
    median_sigma,
    mmd2_unbiased,
    mmd_test,
    rbf_kernel,
    squared_distances,
)

try:
    load_alibi()
except ImportError:
    pytest.skip(
        "alibi-detect is not installed here: run in .venv-alibi (tests/alibi/setup_venv.sh)",
        allow_module_level=True,
    )


def windows(seed: int, n: int, m: int, dim: int, shift: float, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    reference = rng.standard_normal((n, dim))
    current = rng.standard_normal((m, dim)) + shift
    return reference.astype(dtype), current.astype(dtype)


def our_sigma(reference: np.ndarray) -> float:
    return median_sigma(squared_distances(reference, reference))


@pytest.mark.parametrize(
    ("n", "m", "dim", "shift"), [(40, 40, 8, 0.0), (120, 80, 384, 0.05), (200, 150, 32, 0.3)]
)
def test_mmd2_equals_alibi_in_float64(n: int, m: int, dim: int, shift: float) -> None:
    reference, current = windows(n + m + dim, n, m, dim, shift, np.float64)
    sigma = our_sigma(reference)
    ours = mmd2_unbiased(
        rbf_kernel(
            squared_distances(np.vstack([reference, current]), np.vstack([reference, current])), sigma
        ),
        n,
    )
    theirs = alibi_mmd(reference, current, sigma, permutations=20, alpha=0.05)["mmd2"]
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


def test_mmd2_equals_alibi_in_float32_within_its_rounding() -> None:
    """Production windows are float32; alibi-detect also sums the kernel in float32."""
    reference, current = windows(7, 300, 300, 384, 0.02, np.float32)
    sigma = our_sigma(reference)
    ours = mmd_test(
        reference, current, alpha=0.05, permutations=50, rng=np.random.default_rng(0), sigma=sigma
    )
    theirs = alibi_mmd(reference, current, sigma, permutations=50, alpha=0.05)
    # float32 sums of 9e4 kernel values near 1: ~1e-7 relative each, the statistic is their difference
    assert abs(ours.mmd2 - theirs["mmd2"]) < 2e-7


def test_median_bandwidth_matches_alibis_inferred_sigma() -> None:
    """Without a given sigma alibi-detect takes the median heuristic on the reference, as ragmon does."""
    reference, current = windows(11, 150, 150, 16, 0.0, np.float64)
    detector = load_alibi()(reference, backend="pytorch", n_permutations=10, device="cpu")
    theirs = float(detector._detector.kernel.sigma.detach().cpu().numpy()[0])
    # alibi takes the lower middle value of the off-diagonal distances, numpy.median the mean of the two
    assert our_sigma(reference) == pytest.approx(theirs, rel=2e-3)


@pytest.mark.parametrize(("seed", "shift"), [(1, 0.0), (2, 0.08), (3, 0.12)])
def test_p_values_agree_within_permutation_noise(seed: int, shift: float) -> None:
    reference, current = windows(seed, 100, 100, 16, shift, np.float64)
    sigma = our_sigma(reference)
    permutations = 1000
    ours = mmd_test(
        reference,
        current,
        alpha=0.05,
        permutations=permutations,
        rng=np.random.default_rng(seed),
        sigma=sigma,
    )
    theirs = alibi_mmd(reference, current, sigma, permutations=permutations, alpha=0.05)
    assert ours.mmd2 == pytest.approx(theirs["mmd2"], rel=1e-9, abs=1e-12)
    # Two independent Monte Carlo estimates of one p: their difference has sd sqrt(2 p(1-p)/B);
    # ours also carries the +1 correction, worth at most 1/(B+1).
    p = max(min(theirs["p_value"], 1 - 1 / permutations), 1 / permutations)
    noise = 4.5 * math.sqrt(2 * p * (1 - p) / permutations) + 1 / (permutations + 1)
    assert abs(ours.p_value - theirs["p_value"]) <= noise
    assert ours.p_value > 0 and ours.p_value >= 1 / (permutations + 1)


def test_the_optional_backend_means_what_ragmons_test_means() -> None:
    """drift.backend: alibi gives the same statistic and a +1-corrected p-value (never 0)."""
    reference, current = windows(5, 80, 60, 16, 0.1, np.float64)
    ours = mmd_test(reference, current, alpha=0.05, permutations=999, rng=np.random.default_rng(1))
    theirs = mmd_test(
        reference,
        current,
        alpha=0.05,
        permutations=999,
        rng=np.random.default_rng(2),
        statistic=alibi_statistic,
    )
    assert theirs.sigma == ours.sigma
    assert theirs.mmd2 == pytest.approx(ours.mmd2, rel=1e-9, abs=1e-12)
    p = ours.p_value
    assert abs(theirs.p_value - p) <= 4.5 * math.sqrt(2 * p * (1 - p) / 999) + 1 / 1000
    far = mmd_test(
        reference,
        current + 5.0,
        alpha=0.05,
        permutations=99,
        rng=np.random.default_rng(3),
        statistic=alibi_statistic,
    )
    assert far.p_value == pytest.approx(1 / 100) and far.drift
