"""Redaction CPU per text: adversarial shapes (one per pattern) against ordinary prose of the same length.

`python -m tests.bench.bench_redaction [--out PATH]`. Each shape is timed at n and 2n characters
(2n = the document limit), interleaved with the reference, prose with a few addresses and numbers
in it, measured in the same run. Reported: medians, the shape's cost over the reference's, and the
growth t(2n)/t(n) (linear: 2, quadratic: 4).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

from service.api.redaction import Redactor
from tests.bench.common import write_report
from tests.service.api.test_redaction_linear import SHAPES

N = 16_384
PROSE = (
    "Write to help@example.com or call +1 415 555 0132 about order 58213 of 2024-06-11; "
    "the router at 10.0.0.1 was reset. "
)


def prose(n: int) -> str:
    return (PROSE * (n // len(PROSE) + 1))[:n]


def timed(redactor: Redactor, text: str, rounds: int = 7) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        redactor.redact(text, Counter())
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    redactor = Redactor()
    rows = []
    ref = {2 * N: prose(2 * N)}
    for name, shape in sorted(SHAPES.items()):
        small, large = shape(N), shape(2 * N)
        t_small, t_large, r_large = [], [], []
        for _ in range(3):
            t_small.append(timed(redactor, small))
            r_large.append(timed(redactor, ref[2 * N]))
            t_large.append(timed(redactor, large))
        ts, tl = statistics.median(t_small), statistics.median(t_large)
        rl = statistics.median(r_large)
        rows.append(
            f"| {name} | {ts * 1e3:.2f} | {tl * 1e3:.2f} | {rl * 1e3:.2f} | {tl / rl:.1f} | {tl / ts:.2f} |"
        )
    body = (
        f"Medians of 3 interleaved rounds of 7 runs each; n = {N}, 2n = {2 * N} characters (the document "
        "limit).\n\n| shape | ms at n | ms at 2n | reference ms at 2n | x reference | growth t(2n)/t(n) |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )
    write_report("redaction", "Redaction: adversarial shapes vs ordinary prose", body, args.out)


if __name__ == "__main__":
    main()
