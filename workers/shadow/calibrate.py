"""Calibration of the verdict: false verdicts under an equal candidate, power on a known effect.

An equal candidate is simulated over many seeds; the report is checked after
every batch of pairs, as people watching the dashboard do. A false verdict is
"better" or "worse" at any check. The anytime-valid confidence sequence keeps
that rate at or below alpha; the fixed-n sign test checked as often does not
(which is why it is shown but never decides). `ragmon shadow calibrate`
prints the table written in docs/shadow.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workers.shadow.power import sign_test_power
from workers.shadow.sequential import anytime_p_values
from workers.shadow.signtest import sign_test_p


@dataclass(frozen=True)
class CalibrationRow:
    scenario: str
    seeds: int
    checks: int
    pairs: int
    anytime_rate: float  # share of seeds with a better/worse verdict at any check
    fixed_peeking_rate: float  # same, for the fixed-n sign test checked after every batch
    fixed_final_rate: float  # the fixed-n sign test checked once, at the end


def binary_differences(
    rng: np.random.Generator, shape: tuple[int, int], discordance: float, delta: float
) -> np.ndarray:
    """Paired binary outcomes as differences in {-1, 0, +1}: discordant with prob q, a win with (q+delta)/2q."""
    discordant = rng.random(shape) < discordance
    win = rng.random(shape) < (discordance + delta) / (2.0 * discordance)
    return np.where(discordant, np.where(win, 1.0, -1.0), 0.0)


def score_differences(rng: np.random.Generator, shape: tuple[int, int], delta: float) -> np.ndarray:
    """Bounded continuous outcomes (faithfulness-like scores in 0..1), candidate shifted by delta."""
    production = rng.beta(4.0, 1.5, shape)
    candidate = np.clip(rng.beta(4.0, 1.5, shape) + delta, 0.0, 1.0)
    return candidate - production


def _verdict_hits(
    d: np.ndarray, batch: int, alpha: float, tight_at: int, min_pairs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per seed: (anytime verdict at any check, sign test at any check, sign test at the end)."""
    seeds, total = d.shape
    checks = np.arange(batch, total + 1, batch)
    csum, csq = np.cumsum(d, axis=1)[:, checks - 1], np.cumsum(d * d, axis=1)[:, checks - 1]
    wins = np.cumsum(d > 0, axis=1)[:, checks - 1]
    losses = np.cumsum(d < 0, axis=1)[:, checks - 1]
    n = np.broadcast_to(checks.astype(float), csum.shape)
    mean = csum / n
    var = (csq - n * mean * mean) / np.maximum(n - 1, 1)
    anytime = (anytime_p_values(n, mean, var, alpha, tight_at) <= alpha) & (n >= min_pairs)
    sign = np.array(
        [
            [sign_test_p(int(w), int(lost)) <= alpha for w, lost in zip(wr, lr, strict=True)]
            for wr, lr in zip(wins, losses, strict=True)
        ]
    )
    return np.asarray(anytime.any(axis=1)), np.asarray(sign.any(axis=1)), sign[:, -1]


def null_calibration(
    seeds: int = 1000,
    batches: int = 40,
    batch: int = 50,
    alpha: float = 0.05,
    tight_at: int = 1000,
    min_pairs: int = 30,
    seed: int = 2026,
) -> list[CalibrationRow]:
    rng = np.random.default_rng(seed)
    shape = (seeds, batches * batch)
    scenarios = {
        "binary, 20% discordant": binary_differences(rng, shape, 0.2, 0.0),
        "binary, 5% discordant": binary_differences(rng, shape, 0.05, 0.0),
        "score (0..1)": score_differences(rng, shape, 0.0),
    }
    rows = []
    for name, d in scenarios.items():
        anytime, peeking, final = _verdict_hits(d, batch, alpha, tight_at, min_pairs)
        rows.append(
            CalibrationRow(
                name,
                seeds,
                batches,
                shape[1],
                float(anytime.mean()),
                float(peeking.mean()),
                float(final.mean()),
            )
        )
    return rows


def power_on_known_effect(
    seeds: int = 1000,
    pairs: int = 200,
    discordance: float = 0.2,
    delta: float = 0.10,
    alpha: float = 0.05,
    tight_at: int = 1000,
    seed: int = 7,
) -> dict[str, float]:
    """Seed table row (net +10 points, 20% discordant): power of each test at `pairs` pairs."""
    rng = np.random.default_rng(seed)
    d = binary_differences(rng, (seeds, pairs), discordance, delta)
    anytime, _, final = _verdict_hits(d, pairs, alpha, tight_at, 30)
    return {
        "pairs": pairs,
        "discordance": discordance,
        "delta": delta,
        "sign_test_exact": sign_test_power(pairs, discordance, delta, alpha),
        "sign_test_simulated": float(final.mean()),
        "anytime_simulated": float(anytime.mean()),
    }


def render_table(rows: list[CalibrationRow], alpha: float) -> str:
    lines = [
        "| equal candidate | seeds | checks × pairs | anytime verdict false rate | sign test, checked every batch | sign test, once at the end |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.scenario} | {r.seeds} | {r.checks} × {r.pairs // r.checks} | {r.anytime_rate:.3f} | "
        f"{r.fixed_peeking_rate:.3f} | {r.fixed_final_rate:.3f} |"
        for r in rows
    ]
    lines.append(f"\n(alpha = {alpha})")
    return "\n".join(lines)
