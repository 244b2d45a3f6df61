"""`ragmon retrieval report` on small files: ragmon's own format and the golden-set export, md and json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from service.retrieval.report import InputError, read_traces


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(40):  # intent billing: gold always retrieved at 1, dropped from the context every 4th
        rows.append(
            {
                "tenant": "acme",
                "trace_id": f"b{i}",
                "intent": "billing",
                "variant": "a",
                "release": "r1",
                "retrieved_ids": ["g", "x", "y"],
                "context_ids": ["x", "y"] if i % 4 == 0 else ["g", "x"],
                "gold_ids": ["g"],
            }
        )
    for _ in range(5):  # intent search: too few for an interval
        rows.append(
            {
                "tenant": "acme",
                "intent": "search",
                "variant": "a",
                "release": "r1",
                "retrieved_ids": ["x", "g"],
                "context_ids": ["x", "g"],
                "gold": {"g": 2, "h": 1},
            }
        )
    rows.append(
        {
            "tenant": "acme",
            "intent": "search",
            "variant": "a",
            "release": "r1",
            "retrieved_ids": ["x"],
            "context_ids": ["x"],
            "gold_ids": [],
        }
    )  # no gold: not counted
    rows.append({"tenant": "other", "retrieved_ids": ["g"], "gold_ids": ["g"]})
    return rows


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "labels.jsonl", _rows())
    assert (
        main(
            [
                "retrieval",
                "report",
                "--input",
                str(path),
                "--tenant",
                "acme",
                "--format",
                "json",
                "--k",
                "1,3",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["k"] == [1, 3] and report["traces"] == 46 and report["other_tenants_skipped"] == 1
    groups = {(g["intent"], g["variant"], g["release"]): g for g in report["groups"]}
    assert set(groups) == {("*", "*", "*"), ("billing", "a", "r1"), ("search", "a", "r1")}
    billing = groups["billing", "a", "r1"]
    assert billing["labelled"] == 40 and billing["no_gold"] == 0
    r, c = billing["stages"]["retrieved"], billing["stages"]["context"]
    assert r["recall@1"]["mean"] == 1.0 and r["recall@1"]["n"] == 40 and r["recall@1"]["status"] == "ok"
    assert c["recall@3"]["mean"] == 0.75 and c["recall@3"]["low"] < 0.75 < c["recall@3"]["high"]
    assert billing["trace"]["dropped"]["mean"] == 0.25 and billing["trace"]["missed"]["mean"] == 0.0
    search = groups["search", "a", "r1"]
    assert search["traces"] == 6 and search["labelled"] == 5 and search["no_gold"] == 1
    s = search["stages"]["retrieved"]
    assert s["recall@3"]["mean"] == 0.5 and s["recall@3"]["status"] == "label more"
    assert s["recall@3"]["low"] is None and s["mrr"]["mean"] == 0.5
    assert set(report["groups"][0]["stages"]["context"]) == {
        "hit@1",
        "hit@3",
        "recall@1",
        "recall@3",
        "precision@1",
        "precision@3",
        "ndcg@1",
        "ndcg@3",
        "mrr",
    }


def test_markdown_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "labels.jsonl", _rows())
    assert main(["retrieval", "report", "--input", str(path), "--tenant", "acme"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Retrieval quality: tenant acme")
    assert "## intent billing, variant a, release r1" in out and "## all traces" in out
    assert "| Recall@10 | 1.000 [1.000, 1.000] | 40 |" in out
    assert "(label more: n < 30)" in out
    assert "dropped: gold among the candidates, not in the context (reranker/packer): 0.250 [" in out
    # reproducible: the same seed prints the same intervals
    assert main(["retrieval", "report", "--input", str(path), "--tenant", "acme"]) == 0
    assert capsys.readouterr().out == out


def test_reads_the_golden_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the shape service/review/golden.py writes: documents are the context; no candidates there
    row = {
        "tenant": "acme",
        "item_id": 1,
        "trace_id": "t1",
        "query": "q",
        "documents": [{"id": "d1", "text": "..."}, {"id": "d2", "text": "..."}],
        "answer": "a",
        "gold_ids": ["d2"],
        "labels": [],
        "stratum": "s",
        "versions": {},
    }
    path = _write(tmp_path / "golden.jsonl", [row, {**row, "candidates": [{"id": "d2"}, {"id": "d1"}]}])
    assert main(["retrieval", "report", "--input", str(path), "--tenant", "acme", "--format", "json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert (group["intent"], group["variant"], group["release"]) == ("-", "-", "-")
    assert group["stages"]["context"]["mrr"] == {
        "mean": 0.5,
        "low": None,
        "high": None,
        "n": 2,
        "status": "label more",
    }
    assert (
        group["stages"]["retrieved"]["mrr"]["n"] == 1 and group["stages"]["retrieved"]["mrr"]["mean"] == 1.0
    )


def test_not_entitled_gold_is_counted_and_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {
        "tenant": "acme",
        "retrieved_ids": ["z", "g"],
        "context_ids": ["g"],
        "gold_ids": ["g", "z"],
        "not_entitled_ids": ["z"],
    }
    path = _write(tmp_path / "l.jsonl", [row])
    assert main(["retrieval", "report", "--input", str(path), "--tenant", "acme", "--format", "json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert group["gold_not_entitled"] == 1
    assert group["stages"]["retrieved"]["recall@1"]["mean"] == 0.0
    assert group["stages"]["retrieved"]["recall@3"]["mean"] == 1.0


def test_bad_input_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"tenant": "acme", "context_ids": ["a"], "gold_ids": ["a"]}) + "\n[1]\n")
    assert main(["retrieval", "report", "--input", str(path), "--tenant", "acme"]) == 2
    assert "line 2: a line must be a JSON object" in capsys.readouterr().err
    assert main(["retrieval", "report", "--input", str(tmp_path / "missing.jsonl"), "--tenant", "acme"]) == 2
    with pytest.raises(InputError, match="no gold_ids"):
        read_traces([json.dumps({"tenant": "acme", "context_ids": ["a"]})], "acme")
    with pytest.raises(InputError, match="neither"):
        read_traces([json.dumps({"tenant": "acme", "gold_ids": ["a"]})], "acme")
    with pytest.raises(SystemExit):
        main(["retrieval", "report", "--input", str(path), "--tenant", "acme", "--k", "0"])


def test_no_labelled_trace_is_no_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "l.jsonl", [{"tenant": "acme", "retrieved_ids": ["a"], "gold_ids": []}] * 3)
    assert main(["retrieval", "report", "--input", str(path), "--tenant", "acme"]) == 0
    out = capsys.readouterr().out
    assert "3 traces, 0 with gold, 3 without (not counted)" in out
    assert "| Recall@1 | no data | 0 | no data | 0 |" in out
    assert main(["retrieval", "report", "--input", str(path), "--tenant", "acme", "--format", "json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert group["stages"]["retrieved"]["mrr"] == {
        "mean": None,
        "low": None,
        "high": None,
        "n": 0,
        "status": "no data",
    }
