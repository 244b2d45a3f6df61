"""Run alibi-detect's MMDDrift(backend='pytorch') on windows saved by ragmon; print JSON.

Runs only inside the alibi virtualenv (tests/alibi/setup_venv.sh):

    .venv-alibi/bin/python tests/alibi/alibi_mmd.py INPUT.npz [--repeats R]

INPUT.npz holds `reference` and `current` (float32 rows), `sigma` (the RBF
bandwidth ragmon used), `permutations` and `alpha`. The bandwidth is passed to
alibi-detect explicitly, so both sides use the same kernel. Output: one JSON
object with mmd2, p_value, threshold, seconds (one wall time per repeat: a
detector built on the reference, then score() on the current window), the
process CPU seconds of each repeat, and the
versions; with --float64-check also mmd2_float64, the statistic on float64
copies of the same arrays. Used by test_alibi_parity.py and tests/bench/bench_drift.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np


def load_alibi() -> Any:
    # alibi-detect 0.13 decorates functions with torch.jit.script, which torch 2.13 deprecates.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from alibi_detect.cd import MMDDrift
    logging.getLogger("alibi_detect").setLevel(logging.ERROR)  # "no GPU, falling back to CPU"
    return MMDDrift


def alibi_mmd(
    reference: np.ndarray, current: np.ndarray, sigma: float, permutations: int, alpha: float
) -> dict[str, float]:
    detector_cls = load_alibi()
    detector = detector_cls(
        reference,
        backend="pytorch",
        p_val=alpha,
        sigma=np.array([sigma], dtype=reference.dtype),
        n_permutations=permutations,
        device="cpu",
    )
    p_value, mmd2, threshold = detector.score(current)
    return {"mmd2": float(mmd2), "p_value": float(p_value), "threshold": float(threshold)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", type=Path)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--float64-check",
        action="store_true",
        help="also report MMD² on float64 copies (untimed, 1 permutation): the exact comparison",
    )
    args = parser.parse_args(argv)
    data = np.load(args.input)
    reference = np.ascontiguousarray(data["reference"], dtype=np.float32)
    current = np.ascontiguousarray(data["current"], dtype=np.float32)
    sigma, permutations, alpha = float(data["sigma"]), int(data["permutations"]), float(data["alpha"])
    load_alibi()  # import time is not part of the measurement
    seconds, cpu, out = [], [], {}
    for _ in range(args.repeats):
        started, cpu_started = time.perf_counter(), time.process_time()
        out = alibi_mmd(reference, current, sigma, permutations, alpha)
        seconds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    if args.float64_check:
        exact = alibi_mmd(reference.astype(np.float64), current.astype(np.float64), sigma, 1, 0.5)
        out["mmd2_float64"] = exact["mmd2"]
    import alibi_detect
    import torch

    print(
        json.dumps(
            {
                **out,
                "seconds": seconds,
                "cpu_seconds": cpu,
                "alibi_detect": alibi_detect.__version__,
                "torch": torch.__version__,
                "numpy": np.__version__,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
