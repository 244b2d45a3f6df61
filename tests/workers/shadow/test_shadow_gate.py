"""The release gate of `ragmon shadow compare`: verdicts that fail it, regression budgets, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workers.shadow.bootstrap import BootstrapSettings
from workers.shadow.cli import main
from workers.shadow.compare import CompareSettings, compare
from workers.shadow.gate import GateError, evaluate, parse_budgets, parse_fail_on
from workers.shadow.table import PairTable

FAST = CompareSettings(bootstrap=BootstrapSettings(resamples=300))


def _table(n: int, seed: int, faithful_drop: float, latency_factor: float) -> PairTable:
    """faithful (0/1, 80% in production) and total latency; the candidate loses `faithful_drop` of the
    faithful share and is `latency_factor` times as slow."""
    rng = np.random.default_rng(seed)
    prod_f = (rng.random(n) < 0.80).astype(float)
    cand_f = np.where(rng.random(n) < faithful_drop, 0.0, prod_f)
    prod_l = rng.lognormal(0.0, 0.4, n)
    cand_l = prod_l * latency_factor * rng.lognormal(0.0, 0.05, n)
    return PairTable(
        ["faithful", "latency_total_seconds"],
        np.stack([prod_f, prod_l], 1),
        np.stack([cand_f, cand_l], 1),
        {},
    )


def _by_metric(gate):
    return {c.metric: c for c in gate.checks}


def test_a_worse_candidate_fails_and_names_the_metric() -> None:
    gate = evaluate(compare(_table(3000, 1, 0.10, 1.0), FAST), ["worse"], {})
    checks = _by_metric(gate)
    assert not gate.passed
    assert checks["faithful"].failed and checks["faithful"].verdict == "worse"
    assert "verdict worse" in checks["faithful"].why
    assert checks["faithful"].regression == pytest.approx(0.08, abs=0.02)  # 10% of an 80% share
    assert not checks["latency_total_seconds"].failed


def test_an_equal_candidate_passes_the_default_gate() -> None:
    gate = evaluate(compare(_table(3000, 2, 0.0, 1.0), FAST), ["worse"], {})
    assert gate.passed, [(c.metric, c.verdict) for c in gate.checks]


def test_a_budget_fails_only_a_regression_surely_beyond_it() -> None:
    comparison = compare(_table(3000, 3, 0.0, 1.25), FAST)  # 25% slower, quality unchanged
    latency = next(r for r in comparison.metrics if r.metric == "latency_total_seconds")
    mean = latency.production_mean
    over = _by_metric(evaluate(comparison, ["worse"], {"latency_total_seconds": 0.05 * mean}))
    assert over["latency_total_seconds"].budget_state == "over" and over["latency_total_seconds"].failed
    within = _by_metric(evaluate(comparison, ["inconclusive"], {"latency_total_seconds": 0.6 * mean}))
    assert within["latency_total_seconds"].budget_state == "within"
    assert not within["latency_total_seconds"].failed
    # a budget right at the estimate: undecided, which fails only a strict gate
    at = 0.25 * mean
    lenient = _by_metric(evaluate(comparison, ["not_enough_data"], {"latency_total_seconds": at}))
    strict = _by_metric(evaluate(comparison, ["inconclusive"], {"latency_total_seconds": at}))
    assert lenient["latency_total_seconds"].budget_state == "undecided"
    assert not lenient["latency_total_seconds"].failed and strict["latency_total_seconds"].failed


def test_too_few_pairs_fail_only_when_asked() -> None:
    comparison = compare(_table(10, 4, 0.0, 1.0), FAST)
    assert evaluate(comparison, ["worse"], {}).passed
    gate = evaluate(comparison, ["worse", "not_enough_data"], {"faithful": 0.01})
    assert not gate.passed
    assert {c.budget_state for c in gate.checks} == {"no data"}


def test_bad_gate_options_name_the_option_and_the_rule() -> None:
    with pytest.raises(GateError, match="--fail-on"):
        parse_fail_on("worse,better")
    with pytest.raises(GateError, match="METRIC=DELTA"):
        parse_budgets(["faithful"])
    with pytest.raises(GateError, match="METRIC=DELTA"):
        parse_budgets(["faithful=-1"])
    with pytest.raises(GateError, match="given twice"):
        parse_budgets(["faithful=0.1", "faithful=0.2"])
    with pytest.raises(GateError, match=r"no metric \['hit'\]"):
        evaluate(compare(_table(100, 5, 0.0, 1.0), FAST), ["worse"], {"hit": 0.1})


def test_an_equal_candidate_fails_the_gate_at_most_at_alpha() -> None:
    """The documented false-failure rate (docs/shadow.md): the default gate fails an equal candidate at
    most at alpha (anytime-valid, Holm across the two metrics); 200 seeded runs of 400 pairs."""
    failures = sum(
        not evaluate(compare(_table(400, 100 + seed, 0.0, 1.0), FAST), ["worse"], {}).passed
        for seed in range(200)
    )
    assert failures / 200 <= 0.05 + 2 * (0.05 * 0.95 / 200) ** 0.5, failures


def _jsonl(path: Path, faithful_drop: float, n: int = 1500, seed: int = 9) -> Path:
    rng = np.random.default_rng(seed)
    with path.open("w") as fh:
        for i in range(n):
            prod = int(rng.random() < 0.8)
            cand = 0 if rng.random() < faithful_drop else prod
            fh.write(
                json.dumps(
                    {"request_id": f"q{i}", "metric": "faithful", "production": prod, "candidate": cand}
                )
            )
            fh.write("\n")
    return path


def test_the_cli_exits_1_on_a_regression_and_0_on_an_equal_candidate(tmp_path, capsys) -> None:
    worse = _jsonl(tmp_path / "worse.jsonl", 0.15)
    assert main(["compare", str(worse), "--resamples", "300"]) == 1
    out = capsys.readouterr()
    assert "## Release gate: FAIL" in out.out
    assert "gate FAIL: faithful: verdict worse" in out.err
    equal = _jsonl(tmp_path / "equal.jsonl", 0.0)
    assert main(["compare", str(equal), "--resamples", "300", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["gate"]["passed"] is True and report["gate"]["fail_on"] == ["worse"]
    assert main(["compare", str(equal), "--budget", "nope=1"]) == 2
    assert "no metric ['nope']" in capsys.readouterr().err
