"""A whole comparison: verdicts, slices, the regression hidden by the average, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workers.shadow.bootstrap import BootstrapSettings
from workers.shadow.calibrate import null_calibration, power_on_known_effect
from workers.shadow.compare import CompareSettings, compare
from workers.shadow.offline import read_pairs
from workers.shadow.table import PairTable, build_table

ROOT = Path(__file__).resolve().parents[3]
FAST = CompareSettings(bootstrap=BootstrapSettings(resamples=2000))


def _category_lab() -> PairTable:
    """hit@1 by category, hybrid vs hybrid+rerank (the lab's table): technical is worse, 0/1 over 6."""
    rows = []
    plan = {
        "prose": (18, 0, 0, 17),
        "table": (8, 2, 0, 3),
        "paraphrase": (24, 7, 1, 16),
        "technical": (6, 0, 1, 5),
    }
    for category, (n, wins, losses, both_right) in plan.items():
        for i in range(n):
            if i < wins:
                prod, cand = 0.0, 1.0
            elif i < wins + losses:
                prod, cand = 1.0, 0.0
            else:
                prod = cand = 1.0 if i < wins + losses + both_right else 0.0
            rows.append(({"hit": prod}, {"hit": cand}, {"category": category}))
    return build_table(rows)


def test_masked_regression_in_a_small_slice_is_a_lead_not_a_verdict() -> None:
    c = compare(_category_lab(), FAST)
    (hit,) = c.metrics
    assert (hit.wins, hit.losses, hit.n) == (9, 2, 56)
    assert hit.whole_is_better()  # the bootstrap excludes 0 ...
    assert hit.verdict == "inconclusive"  # ... but the anytime verdict does not claim it
    (flag,) = c.masked_regressions
    assert (flag.value, flag.n, flag.wins, flag.losses, flag.strength) == ("technical", 6, 0, 1, "lead")
    by_slice = {s.value: s for s in c.slices}
    assert (by_slice["paraphrase"].wins, by_slice["paraphrase"].losses) == (7, 1)
    assert not by_slice["paraphrase"].masked_regression


def _synthetic(n: int, seed: int, faithful_shift: float, latency_factor: float) -> PairTable:
    rng = np.random.default_rng(seed)
    prod_f = (rng.random(n) < 0.80).astype(float)
    cand_f = np.where(rng.random(n) < 0.85, prod_f, (rng.random(n) < 0.80 + faithful_shift).astype(float))
    prod_l = rng.lognormal(0.0, 0.4, n)
    cand_l = prod_l * latency_factor * rng.lognormal(0.0, 0.05, n)
    return PairTable(
        ["faithful", "latency_total_seconds"],
        np.stack([prod_f, prod_l], 1),
        np.stack([cand_f, cand_l], 1),
        {},
    )


def test_verdicts_better_and_worse_on_clear_effects() -> None:
    c = compare(_synthetic(4000, 1, faithful_shift=0.15, latency_factor=1.3), FAST)
    by = {r.metric: r for r in c.metrics}
    assert by["faithful"].verdict == "better"
    assert by["latency_total_seconds"].verdict == "worse"  # 30% slower, margin 10%
    assert (
        by["latency_total_seconds"].p95_ratio is not None
        and by["latency_total_seconds"].p95_ratio_lower > 1.2
    )


def test_equal_candidate_is_equivalent_or_inconclusive_never_better_or_worse() -> None:
    c = compare(_synthetic(4000, 2, faithful_shift=0.0, latency_factor=1.0), FAST)
    by = {r.metric: r for r in c.metrics}
    assert by["latency_total_seconds"].verdict == "equivalent"  # non-inferior
    assert by["faithful"].verdict in ("equivalent", "inconclusive")


def test_too_few_pairs_is_not_enough_data() -> None:
    c = compare(_synthetic(12, 3, 0.3, 2.0), FAST)
    assert {r.verdict for r in c.metrics} == {"not_enough_data"}


def test_holm_adjusts_across_the_metrics_of_one_comparison() -> None:
    c = compare(_synthetic(500, 4, 0.05, 1.0), FAST)
    for r in c.metrics:
        assert r.anytime_p_holm >= r.anytime_p and r.sign_p_holm >= r.sign_p


def test_calibration_equal_candidate_checked_every_batch() -> None:
    rows = null_calibration(seeds=300, batches=20, batch=50)
    for row in rows:
        assert row.anytime_rate <= 0.05 + 0.025  # alpha plus two standard errors at 300 seeds
        assert row.fixed_peeking_rate > row.anytime_rate
    # what peeking at a fixed-n test does: well above alpha
    assert sum(r.fixed_peeking_rate for r in rows) / len(rows) > 0.10


def test_power_on_the_lab_effect() -> None:
    power = power_on_known_effect(seeds=300, pairs=200)
    assert power["sign_test_exact"] > 0.8
    assert abs(power["sign_test_simulated"] - power["sign_test_exact"]) < 0.06
    assert 0.2 < power["anytime_simulated"] < power["sign_test_exact"]  # the price of peeking safely


def _jsonl(tmp_path: Path) -> Path:
    lines = []
    for i in range(56):
        prod, cand = (0, 1) if i < 9 else (1, 0) if i < 11 else (1, 1)
        lines.append(
            json.dumps(
                {
                    "request_id": f"q{i}",
                    "metric": "hit@1",
                    "production": prod,
                    "candidate": cand,
                    "slice": "technical" if i % 9 == 0 else "other",
                }
            )
        )
    path = tmp_path / "ab.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_compare_cli_json_report(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "service.cli",
            "shadow",
            "compare",
            str(_jsonl(tmp_path)),
            "--format",
            "json",
            "--resamples",
            "2000",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    report = json.loads(out.stdout)
    (metric,) = report["metrics"]
    assert (metric["wins"], metric["losses"], round(metric["sign_p"], 3)) == (9, 2, 0.065)
    assert {s["value"] for s in report["slices"]} == {"technical", "other"}


@pytest.mark.slow
def test_compare_cli_markdown_and_bad_input(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "workers.shadow.cli", "compare", str(_jsonl(tmp_path)), "--resamples", "1000"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    assert "| hit@1 | 56 |" in out.stdout and "**inconclusive**" in out.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"request_id": "a", "metric": "hit", "production": 1, "candidate": "yes"}\n')
    res = subprocess.run(
        [sys.executable, "-m", "workers.shadow.cli", "compare", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert res.returncode == 2
    assert "line 1: 'candidate' must be a finite number or a boolean" in res.stderr


def test_read_pairs_rejects_a_repeated_metric() -> None:
    line = '{"request_id": "a", "metric": "hit", "production": 1, "candidate": 0}'
    try:
        read_pairs([line, line])
    except ValueError as exc:
        assert "line 2" in str(exc) and "already has metric 'hit'" in str(exc)
    else:
        raise AssertionError("a repeated (request_id, metric) must be rejected")
