"""`make bench`: every benchmark in turn, each writing its report under tests/bench/reports/.

Benchmarks are not tests: they measure, report medians and ratios against a
reference measured in the same run, and never fail on a number. A benchmark
that crashes is reported and the others still run (exit status 1 at the end).
Usage: python tests/bench/run_all.py [--only NAME ...] [--reference REV]
(--reference: the worker benchmarks also run that git revision's tree, interleaved, as the reference)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from tests.bench.common import REPORTS, ROOT

BENCHES = {
    "ingest": "tests.bench.bench_ingest",
    "otlp": "tests.bench.bench_otlp",
    "metrics_worker": "tests.bench.bench_metrics_worker",
    "exclusion": "tests.bench.bench_exclusion",
    "drift": "tests.bench.bench_drift",
    "drift_worker": "tests.bench.bench_drift_worker",
    "faithfulness": "tests.bench.bench_faithfulness",
    "review": "tests.bench.bench_review",
    "phoenix": "tests.bench.bench_phoenix",
    "shadow": "tests.bench.bench_shadow",
    "redaction": "tests.bench.bench_redaction",
    "fairness": "tests.bench.bench_fairness",
    "private": "tests.bench.bench_private",
    "retrieval": "tests.bench.bench_retrieval",
    "series_budget": "tests.bench.bench_series",
}

END_TO_END = (
    "ingest",
    "otlp",
    "metrics_worker",
    "exclusion",
    "drift_worker",
    "faithfulness",
    "review",
    "shadow",
)  # take --reference


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", choices=sorted(BENCHES), default=None)
    ap.add_argument(
        "--reference", default=None, help="git revision the end-to-end worker benchmarks compare with"
    )
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    failed = []
    for name in args.only or list(BENCHES):
        started = time.monotonic()
        out = REPORTS / f"{name}.md"
        print(f"== {name} -> {out}", flush=True)
        extra = ["--reference", args.reference] if args.reference and name in END_TO_END else []
        code = subprocess.run(
            [sys.executable, "-m", BENCHES[name], "--out", str(out), *extra], cwd=ROOT, env=env
        ).returncode
        print(f"== {name}: exit {code} after {time.monotonic() - started:.0f}s", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
