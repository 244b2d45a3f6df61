"""`ragmon gate`: both systems' outputs on the release-gate set, paired per item, gated like `shadow compare`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.workers.shadow.gate_data import golden, outputs, write
from workers.checks.answer import CHECKS
from workers.shadow.bootstrap import BootstrapSettings
from workers.shadow.cli import main
from workers.shadow.compare import CompareSettings, compare
from workers.shadow.gate import evaluate
from workers.shadow.gate_hhem import load_scorer
from workers.shadow.gate_inputs import GateInputError, read_golden, read_outputs
from workers.shadow.golden_gate import GateInputs, gate_specs, gate_table

FAST = ["--resamples", "200", "--no-hhem"]


def _lines(rows: list[dict]) -> list[str]:
    return [json.dumps(r) for r in rows]


def _inputs(n: int, prod: list[dict], cand: list[dict]) -> GateInputs:
    queries = read_golden(_lines(golden(n)), "golden")
    return GateInputs(
        queries, read_outputs(_lines(prod), "p", queries), read_outputs(_lines(cand), "c", queries)
    )


def _gate(inputs: GateInputs, seed: int = 0, score=None):
    settings = CompareSettings(
        bootstrap=BootstrapSettings(resamples=100, seed=seed), specs=gate_specs(inputs.ks)
    )
    return evaluate(compare(gate_table(inputs, score), settings), ["worse"], {})


def test_the_table_holds_the_retrieval_metrics_the_checks_and_the_intent_per_item() -> None:
    prod = outputs(3, 0)
    cand = [dict(r) for r in prod]
    cand[0] = {**cand[0], "context": [], "answer": {"text": "The fee is 99 euros.", "citations": ["nowhere"]}}
    inputs = _inputs(3, prod, cand)
    table = gate_table(inputs)
    col = table.metrics.index
    assert "retrieved.recall@5" in table.metrics and "context.mrr" in table.metrics
    assert {f"check.{c}" for c in CHECKS} <= set(table.metrics)
    assert "faithfulness_score" not in table.metrics  # no scorer: HHEM is not a column
    assert table.slices["intent"].tolist() == ["billing", "returns", "account"]
    # production's item 0 and the candidate's: same retrieval, the candidate gave no context
    assert table.candidate[0, col("context.recall@5")] == 0.0
    assert table.production[0, col("retrieved.recall@5")] == table.candidate[0, col("retrieved.recall@5")]
    assert table.candidate[0, col("check.citations_known")] == 1.0  # cites a document it was not given
    assert table.candidate[0, col("check.figures_grounded")] == 1.0
    assert table.production[0, col("check.citations_known")] == 0.0
    assert np.isnan(table.production[0, col("check.json_valid")])  # a text answer: skipped, no data


def test_hhem_scores_answers_against_their_context_when_a_scorer_is_given() -> None:
    seen: list[tuple[list[str], str]] = []

    def score(pairs: list[tuple[list[str], str]]) -> list[float]:
        seen.extend(pairs)
        return [0.9 if "10 euros" in answer else 0.1 for _, answer in pairs]

    prod = outputs(4, 0, stray=0.0)
    cand = [{**r, "answer": {**r["answer"], "refused": i == 1}} for i, r in enumerate(prod)]
    table = gate_table(_inputs(4, prod, cand), score)
    j = table.metrics.index("faithfulness_score")
    assert table.production[:, j].tolist() == [0.9] * 4
    assert np.isnan(table.candidate[1, j])  # a refusal is not scored
    assert seen[0][0][0].startswith("Document ") and seen[0][1] == "The fee is 10 euros."


def test_hhem_is_skipped_with_the_reason_when_the_model_is_not_there(tmp_path: Path) -> None:
    scorer, why = load_scorer(tmp_path / "models")
    assert scorer is None and why.startswith("skipped: ")
    assert "ragmon models fetch" in why or "ml extra" in why
    assert load_scorer(None) == (None, "skipped: --no-hhem")


def test_the_gate_fails_on_a_known_regression_naming_the_metrics() -> None:
    # the candidate is production with a reranker that loses the gold in 25% more of the items
    n = 300
    gate = _gate(_inputs(n, outputs(n, 5), outputs(n, 5, drop=0.30)))
    failed = {c.metric for c in gate.failures()}
    assert not gate.passed
    assert {"context.recall@5", "dropped"} <= failed
    assert not any(m.startswith("retrieved.") for m in failed)  # the retriever did not change


def test_an_equal_candidate_passes_at_the_documented_false_failure_rate() -> None:
    # docs/shadow.md, "Gating on the golden set": an equal-quality candidate whose every answer is drawn
    # afresh (the harder null: the pairs disagree often) fails the default gate in at most alpha = 5% of
    # runs; measured 0 of 500 at 300 items. Here 80 seeded runs of 200 items: 8 or more failures would
    # have probability 0.05 under a true rate of 5%, so the bound fails the test before alpha is reached.
    n, runs = 200, 80
    failures = sum(
        not _gate(_inputs(n, outputs(n, 2 * s), outputs(n, 2 * s + 1)), seed=s).passed for s in range(runs)
    )
    assert failures <= 7, failures


def _files(tmp_path: Path, n: int, cand_drop: float) -> list[str]:
    g = write(tmp_path / "release_gate.jsonl", golden(n))
    p = write(tmp_path / "prod.jsonl", outputs(n, 5))
    c = write(tmp_path / "cand.jsonl", outputs(n, 5, drop=cand_drop))
    return ["gate", "--golden", str(g), "--production", str(p), "--candidate", str(c)]


def test_the_cli_exits_1_on_a_regression_0_on_an_equal_candidate_and_writes_the_report_either_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_files(tmp_path, 300, 0.30), *FAST]) == 1
    captured = capsys.readouterr()
    assert "## Release gate: FAIL" in captured.out and "| context.recall@5 |" in captured.out
    assert "HHEM skipped: --no-hhem" in captured.err and "gate FAIL: context.recall@5" in captured.err
    assert "gate.hhem: skipped: --no-hhem" in captured.out
    assert main([*_files(tmp_path, 300, 0.05), *FAST, "--format", "json"]) == 0  # the candidate is production
    report = json.loads(capsys.readouterr().out)
    assert report["gate"]["passed"] is True and report["context"]["gate.items"] == 300
    assert {m["metric"] for m in report["metrics"]} >= {"context.ndcg@10", "check.answer_length"}


def test_the_cli_gates_on_a_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [*_files(tmp_path, 300, 0.30), *FAST, "--fail-on", "worse"]
    assert main([*args, "--budget", "context.recall@5=0.5"]) == 1  # worse fails whatever the budget
    capsys.readouterr()
    assert main([*args, "--budget", "nope=0.1"]) == 2
    assert "--budget: no metric ['nope']" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("which", "line", "expected"),
    [
        ("production", "{oops", "--production prod.jsonl: line 2: not JSON"),
        ("production", '{"item_id": 1}', "--production prod.jsonl: line 2: answer: Field required (missing)"),
        (
            "candidate",
            '{"item_id": 1, "answer": {"text": 3}}',
            "--candidate cand.jsonl: line 2: answer.text: Input should be a valid string (string_type)",
        ),
        (
            "candidate",
            '{"item_id": 1, "retrieved_ids": "d1", "answer": {}}',
            "line 2: retrieved_ids: Input should be a valid list (list_type)",
        ),
        ("production", '{"item_id": 0, "answer": {}}', "line 2: item_id: '0' is already on line 1"),
        ("production", '{"item_id": 77, "answer": {}}', "line 2: item_id: '77' is not in the golden set"),
        (
            "golden",
            '{"item_id": 1, "gold_ids": [3]}',
            "release_gate.jsonl: line 2: gold_ids[0]: Input should be",
        ),
        (
            "golden",
            '{"item_id": 1, "split": "development"}',
            "line 2: split: 'development' is not 'release_gate'",
        ),
    ],
)
def test_bad_input_names_the_file_the_line_the_field_and_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str, line: str, expected: str
) -> None:
    n = 2
    rows = {
        "golden": _lines(golden(n)),
        "production": _lines(outputs(n, 0)),
        "candidate": _lines(outputs(n, 1)),
    }
    rows[which] = [rows[which][0], line]
    names = {"golden": "release_gate.jsonl", "production": "prod.jsonl", "candidate": "cand.jsonl"}
    for key, name in names.items():
        (tmp_path / name).write_text("\n".join(rows[key]) + "\n")
    argv = ["gate", *(f"--{k}={tmp_path / v}" for k, v in names.items()), *FAST]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err, err


def test_an_item_without_an_output_is_an_error_not_a_smaller_comparison() -> None:
    queries = read_golden(_lines(golden(3)), "golden")
    with pytest.raises(
        GateInputError, match=r"c: item_id: no output for 1 golden item\(s\), e.g. '2' \(golden line 3\)"
    ):
        read_outputs(_lines(outputs(2, 0)), "c", queries)


def test_hhem_scores_with_the_faithfulness_workers_loader_when_the_files_are_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.workers.faithfulness.hhem_builder import random_hhem

    models = tmp_path / "models"  # laid out as `ragmon models fetch --dir models` lays it out
    random_hhem(models / "flan-t5-base", models / "hhem-2.1-open", "google/flan-t5-base", seed=1234)
    score, why = load_scorer(models)
    assert score is not None and why.startswith("scored with "), why
    values = score([(["The fee is 10 euros."], "The fee is 10 euros."), ([], "The fee is 99 euros.")])
    assert len(values) == 2 and all(0.0 <= v <= 1.0 for v in values)
    args = [
        *_files(tmp_path, 40, 0.05),
        "--resamples",
        "100",
        "--models-dir",
        str(models),
        "--format",
        "json",
    ]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    hhem = next(m for m in report["metrics"] if m["metric"] == "faithfulness_score")
    assert hhem["n"] == 40 and hhem["delta"] == 0.0  # the same answers on the same context score the same
    assert report["context"]["gate.hhem"].startswith("scored with ")


@pytest.mark.slow
def test_ragmon_gate_runs_the_shadow_gate_as_its_own_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    argv = [sys.executable, "-m", "service.cli", *_files(tmp_path, 300, 0.30), *FAST]
    failed = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=root)
    assert failed.returncode == 1, failed.stderr
    assert "## Release gate: FAIL" in failed.stdout and "gate FAIL: context.recall@5" in failed.stderr
    bad = subprocess.run([*argv, "--k", "0"], capture_output=True, text=True, timeout=120, cwd=root)
    assert bad.returncode == 2 and "k must be comma-separated positive integers" in bad.stderr
