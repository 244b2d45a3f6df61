"""The optional alibi-detect backend (`drift.backend: alibi`, `pip install 'ragmon[alibi]'`).

Not the default: alibi-detect is licensed BSL 1.1 (production use needs a
commercial licence from Seldon), pins numpy<2 and transformers<5, and is
about two orders of magnitude slower than ragmon's own test (see
tests/bench/reports/drift.md). It is here for teams that already run it and
want the worker's alarms to come from it; tests/alibi checks both agree.

The kernel bandwidth is ragmon's (median heuristic on the reference) and is
handed to alibi-detect, and its p-value gets the +1 correction, so the result
means what ragmon's does; the threshold is alibi-detect's own.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from typing import Any

import numpy as np

from workers.drift.mmd import MMDResult, check_alpha_permutations, median_sigma, squared_distances

INSTALL_HINT = (
    "pip install 'ragmon[alibi]' in a separate environment (it pins numpy<2 and transformers<5); "
    "alibi-detect is licensed BSL 1.1: production use needs a commercial licence from Seldon"
)


def alibi_available() -> bool:
    return importlib.util.find_spec("alibi_detect") is not None


def _detector_class() -> Any:
    with warnings.catch_warnings():  # alibi-detect 0.13 uses torch.jit.script, deprecated by torch 2.13
        warnings.simplefilter("ignore", DeprecationWarning)
        from alibi_detect.cd import MMDDrift
    logging.getLogger("alibi_detect").setLevel(logging.ERROR)
    return MMDDrift


def alibi_mmd_test(
    reference: np.ndarray,
    current: np.ndarray,
    *,
    alpha: float,
    permutations: int,
    rng: np.random.Generator,
    sigma: float | None = None,
) -> MMDResult:
    """Same contract as workers.drift.mmd.mmd_test, computed by MMDDrift(backend='pytorch')."""
    check_alpha_permutations(alpha, permutations)
    if sigma is None:
        sigma = median_sigma(squared_distances(reference, reference))
    detector_class = _detector_class()
    # alibi-detect draws its permutations from numpy's global RNG: seed it from ours.
    np.random.seed(int(rng.integers(2**32)))
    detector = detector_class(
        reference,
        backend="pytorch",
        p_val=alpha,
        sigma=np.array([sigma], dtype=reference.dtype),
        n_permutations=permutations,
        device="cpu",
    )
    p_raw, mmd2, threshold = detector.score(current)
    exceed = int(round(float(p_raw) * permutations))  # alibi-detect: mean(observed <= permuted)
    p_value = (1 + exceed) / (1 + permutations)
    return MMDResult(
        mmd2=float(mmd2),
        p_value=p_value,
        threshold=float(threshold),
        drift=p_value <= alpha,
        sigma=float(sigma),
        permutations=permutations,
        n_reference=len(reference),
        n_current=len(current),
    )
