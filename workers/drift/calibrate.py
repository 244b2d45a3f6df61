"""Calibrate the drift alarm on known shifts: false alarm rate and power.

From a reference sample of a tenant's queries (embeddings), repeat the
production test on windows of the configured size:
  - no shift: reference and current are disjoint draws from the same sample,
    so every detection is a false alarm (its rate should sit at or below alpha);
  - shift s: the current window mixes in a share s of out-of-distribution
    queries (5% .. 50%), so the detection rate is the power against that shift.
The smallest shift detected with the target power (80%) is the drift the
alarm can be relied on to see at that window size and alpha.

Out-of-distribution queries come from a file, or, when there is none, from the
reference itself: the k-means cluster farthest from the rest is held out, a
topic the current window then "discovers".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from service.contracts.stats import wilson_interval
from workers.drift.mmd import check_alpha_permutations, mmd_test

DEFAULT_SHIFTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5)
POWER_TARGET = 0.8


@dataclass(frozen=True)
class Rate:
    shift: float  # share of out-of-distribution queries in the current window (0 = no shift)
    detections: int
    repetitions: int
    low: float  # 95% Wilson interval
    high: float

    @property
    def rate(self) -> float:
        return self.detections / self.repetitions


@dataclass
class Calibration:
    window: int
    alpha: float
    permutations: int
    repetitions: int
    ood_source: str
    rows: list[Rate] = field(default_factory=list)

    @property
    def false_alarm(self) -> Rate | None:
        return next((r for r in self.rows if r.shift == 0.0), None)

    def smallest_detected_shift(self, power: float = POWER_TARGET) -> float | None:
        hits = [r.shift for r in self.rows if r.shift > 0.0 and r.rate >= power]
        return min(hits) if hits else None

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["rows"] = [{**asdict(r), "rate": r.rate} for r in self.rows]
        out["smallest_shift_at_80pct_power"] = self.smallest_detected_shift()
        return out


def holdout_ood(
    embeddings: np.ndarray, rng: np.random.Generator, clusters: int = 5, iterations: int = 25
) -> tuple[np.ndarray, np.ndarray]:
    """Split a sample into (in-distribution, held-out topic) with a small k-means."""
    if len(embeddings) < 2 * clusters:
        raise ValueError(
            f"reference: need at least {2 * clusters} rows to hold out a topic, got {len(embeddings)}"
        )
    x = embeddings.astype(np.float64)
    centres = x[rng.choice(len(x), size=clusters, replace=False)]
    assign = np.zeros(len(x), dtype=np.int64)
    for _ in range(iterations):
        d = (x * x).sum(1)[:, None] - 2 * x @ centres.T + (centres * centres).sum(1)[None, :]
        assign = d.argmin(axis=1)
        for c in range(clusters):
            if np.any(assign == c):
                centres[c] = x[assign == c].mean(axis=0)
    sizes = np.bincount(assign, minlength=clusters)
    mean = x.mean(axis=0)
    distance = np.where(sizes > 0, ((centres - mean) ** 2).sum(1), -np.inf)
    far = int(distance.argmax())
    return embeddings[assign != far], embeddings[assign == far]


def _detect(
    pool: np.ndarray,
    ood: np.ndarray,
    shift: float,
    window: int,
    alpha: float,
    permutations: int,
    rng: np.random.Generator,
) -> bool:
    n_ood = int(round(shift * window))
    picks = rng.choice(len(pool), size=2 * window - n_ood, replace=False)
    reference = pool[picks[:window]]
    current = pool[picks[window:]]
    if n_ood:
        current = np.concatenate([current, ood[rng.choice(len(ood), size=n_ood, replace=False)]])
    return mmd_test(reference, current, alpha=alpha, permutations=permutations, rng=rng).drift


def calibrate(
    reference: np.ndarray,
    ood: np.ndarray,
    *,
    window: int,
    alpha: float,
    permutations: int,
    repetitions: int,
    rng: np.random.Generator,
    shifts: Sequence[float] = DEFAULT_SHIFTS,
    ood_source: str = "file",
) -> Calibration:
    check_alpha_permutations(alpha, permutations)
    if window < 5:
        raise ValueError(f"window must be at least 5, got {window}")
    if repetitions < 1:
        raise ValueError(f"repetitions must be at least 1, got {repetitions}")
    if any(not 0.0 <= s <= 1.0 for s in shifts):
        raise ValueError(f"shifts must lie in [0, 1], got {list(shifts)}")
    if len(reference) < 2 * window:
        raise ValueError(
            f"reference: {len(reference)} in-distribution rows cannot fill two disjoint windows of {window}; "
            f"give at least {2 * window} rows or a smaller --window"
        )
    needed = int(round(max(shifts) * window))
    if len(ood) < needed:
        raise ValueError(
            f"ood: {len(ood)} out-of-distribution rows cannot make a {max(shifts):.0%} mix of a window of "
            f"{window} (needs {needed}); give more or a smaller --window"
        )
    if reference.shape[1:] != ood.shape[1:]:
        raise ValueError(f"ood rows have shape {ood.shape[1:]}, the reference rows {reference.shape[1:]}")
    report = Calibration(window, alpha, permutations, repetitions, ood_source)
    for shift in shifts:
        hits = sum(
            _detect(reference, ood, shift, window, alpha, permutations, rng) for _ in range(repetitions)
        )
        report.rows.append(Rate(shift, hits, repetitions, *wilson_interval(hits, repetitions)))
    return report


def render(report: Calibration) -> str:
    lines = [
        f"window {report.window} vs {report.window}, alpha {report.alpha}, {report.permutations} permutations, "
        f"{report.repetitions} repetitions per row, out-of-distribution queries: {report.ood_source}",
        "",
        "| OOD share in current window | detection rate | 95% interval | meaning |",
        "|---:|---:|---|---|",
    ]
    for r in report.rows:
        meaning = "false alarm rate (should be <= alpha)" if r.shift == 0.0 else "power"
        lines.append(f"| {r.shift:.0%} | {r.rate:.3f} | [{r.low:.3f}, {r.high:.3f}] | {meaning} |")
    smallest = report.smallest_detected_shift()
    lines.append("")
    if smallest is None:
        lines.append(
            f"no tested shift reached {POWER_TARGET:.0%} power at window {report.window}: "
            "use a larger window, a larger alpha, or accept that only larger shifts are seen"
        )
    else:
        lines.append(
            f"smallest shift detected with {POWER_TARGET:.0%} power at window {report.window} "
            f"and alpha {report.alpha}: {smallest:.0%} out-of-distribution queries"
        )
    fa = report.false_alarm
    if fa is not None and fa.low > report.alpha:
        lines.append(
            f"WARNING: the false alarm rate {fa.rate:.3f} is above alpha {report.alpha} "
            "even at the low end of its interval: the sample is not exchangeable (duplicates, time order?)"
        )
    return "\n".join(lines)
