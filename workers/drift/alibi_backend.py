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

from workers.drift.mmd import MMDInput, Statistic, median_sigma, squared_distances

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


def alibi_statistic(given: MMDInput) -> Statistic:
    """The statistic of workers.drift.mmd.mmd_test computed by MMDDrift(backend='pytorch'):
    `mmd_test(..., statistic=alibi_statistic)`."""
    reference, sigma = given.reference, given.sigma
    if sigma is None:
        sigma = median_sigma(squared_distances(reference, reference))
    detector_class = _detector_class()
    # alibi-detect draws its permutations from numpy's global RNG: seed it from ours.
    np.random.seed(int(given.rng.integers(2**32)))
    detector = detector_class(
        reference,
        backend="pytorch",
        p_val=given.alpha,
        sigma=np.array([sigma], dtype=reference.dtype),
        n_permutations=given.permutations,
        device="cpu",
    )
    p_raw, mmd2, threshold = detector.score(given.current)
    exceed = int(round(float(p_raw) * given.permutations))  # alibi-detect: mean(observed <= permuted)
    return Statistic(float(mmd2), exceed, float(threshold), float(sigma))
