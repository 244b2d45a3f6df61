"""`ragmon probes add|list|export|pin|report` on real PostgreSQL, with results stored by the probes worker:
a declared change gives a before/after report with intervals, and no drop in the alerting series."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from service.cli import main
from service.contracts import Topics, reviewdb
from service.probes.report import ReportOptions, paired_interval
from service.probes.store import ProbeFileError, parse_probe, parse_version
from tests.workers.probes.probe_events import at, release_event, run
from workers.probes.config import ProbesConfig
from workers.probes.metrics import ProbesMetrics
from workers.probes.processor import ProbesProcessor
from workers.probes.store import ProbeStore

N = 12


def _probes_file(tmp_path: Path) -> Path:
    path = tmp_path / "probes.jsonl"
    lines = [
        {"set": "billing", "query_id": f"q{i}", "query": f"question {i}", "gold_ids": [f"g{i}"]}
        for i in range(N)
    ]
    lines.append({"set": "billing", "query_id": "nogold", "query": "no gold for this one"})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> str:
    monkeypatch.setenv("RAGMON_DATABASE_URL", url)
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_add_list_export_pin_and_a_declared_change_report(
    review_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = review_db_url
    _cli(monkeypatch, capsys, url, "probes", "add", "--tenant", "acme", "--file", str(_probes_file(tmp_path)))
    listed = _cli(monkeypatch, capsys, url, "probes", "list", "--tenant", "acme")
    assert len(listed.splitlines()) == N + 1 and "nogold\tno gold" in listed
    exported = _cli(monkeypatch, capsys, url, "probes", "export", "--tenant", "acme")
    rows = [json.loads(x) for x in exported.splitlines()]
    assert {"set": "billing", "query_id": "q3", "query": "question 3", "gold_ids": ["g3"]} in rows
    assert _cli(monkeypatch, capsys, url, "probes", "list", "--tenant", "globex") == ""

    registry = CollectorRegistry()
    proc = ProbesProcessor(ProbesConfig(k=3), ProbesMetrics(registry), ProbeStore(url, 600), Topics("t"))
    assert proc.readiness().ready
    # v1 finds the gold of half the probes; v2 (declared by a release) finds all, with other neighbours
    v1 = {f"q{i}": ([f"g{i}", "a", "b"] if i % 2 else ["a", "b", "c"]) for i in range(N)}
    v2 = {f"q{i}": [f"g{i}", "c", "d"] for i in range(N)}
    proc.process(run(proc, at(0), v1, model="emb-v1", index="idx-1"))
    proc.process([release_event(at(55))])
    proc.process(run(proc, at(60), v2, model="emb-v2", index="idx-2"))
    labels = {"tenant": "acme", "probe_set": "billing", "embedding_model": "emb-v2", "index_version": "idx-2"}
    # no page: the declared version is its own baseline
    assert registry.get_sample_value("ragmon_rag_probe_overlap_ratio", labels) == 1.0
    assert registry.get_sample_value("ragmon_rag_probe_gold_recall_ratio", labels) == 1.0

    out = _cli(
        monkeypatch, capsys, url, "probes", "report", "--tenant", "acme", "--from", "emb-v1@idx-1",
        "--to", "emb-v2@idx-2", "--k", "3", "--json",
    )  # fmt: skip
    report = json.loads(out)
    assert report["paired_probes"] == N
    assert report["gold_recall_from"]["mean"] == 0.5 and report["gold_recall_to"]["mean"] == 1.0
    diff = report["gold_recall_difference"]
    assert diff["mean"] == 0.5 and 0 < diff["interval"]["low"] <= 0.5 <= diff["interval"]["high"] <= 1.0
    assert report["verdict"] == "at least as good"
    back = json.loads(
        _cli(
            monkeypatch,
            capsys,
            url,
            "probes",
            "report",
            "--tenant",
            "acme",
            "--from",
            "emb-v2@idx-2",
            "--to",
            "emb-v1@idx-1",
            "--k",
            "3",
            "--json",
        )  # fmt: skip
    )
    assert back["verdict"] == "worse"
    text = _cli(monkeypatch, capsys, url, "probes", "report", "--tenant", "acme", "--from", "emb-v1@idx-1",
                "--to", "emb-v9", "--k", "3")  # fmt: skip
    assert "verdict: no data" in text

    # pin by hand: idx-1 again is the baseline from now on; the next idx-2 replay is compared with it
    _cli(monkeypatch, capsys, url, "probes", "pin", "--tenant", "acme", "--set", "billing", "--version",
         "emb-v1@idx-1", "--at", at(0).isoformat())  # fmt: skip
    proc.process(run(proc, at(120), v2, model="emb-v2", index="idx-2"))
    assert registry.get_sample_value("ragmon_rag_probe_overlap_ratio", labels) == 1.0  # idx-2 has its own
    listed = _cli(monkeypatch, capsys, url, "probes", "baselines", "--tenant", "acme").splitlines()
    assert [line.split("\t")[:4] for line in listed] == [
        ["billing", "emb-v1@idx-1", "pinned", "current"],
        ["billing", "emb-v2@idx-2", "declared", "earlier"],
    ]
    with reviewdb.connect(url) as conn:
        hows: dict[str, str] = dict(conn.execute("SELECT index_version, how FROM probe_baseline").fetchall())
    assert hows == {"idx-1": "pinned", "idx-2": "declared"}
    proc.close()


def test_a_bad_probe_line_names_line_field_and_rule() -> None:
    with pytest.raises(ProbeFileError, match="line 3: set must match"):
        parse_probe(3, {"set": "Billing Set", "query_id": "q1", "query": "x"})
    with pytest.raises(ProbeFileError, match="line 1: unknown field 'gold'"):
        parse_probe(1, {"set": "b", "query_id": "q1", "query": "x", "gold": []})
    with pytest.raises(ProbeFileError, match="line 2: gold_ids holds 'a b'"):
        parse_probe(2, {"set": "b", "query_id": "q1", "query": "x", "gold_ids": ["a b"]})
    assert parse_version("emb-v1@idx-1") == ("emb-v1", "idx-1")
    assert parse_version("emb-v1") == ("emb-v1", "")


def test_paired_interval_holds_the_mean_and_narrows_with_n() -> None:
    o = ReportOptions(resamples=500)
    small = paired_interval([0.0, 1.0] * 5, o)
    large = paired_interval([0.0, 1.0] * 200, o)
    assert small is not None and large is not None
    assert small[1] <= 0.5 <= small[2] and large[1] <= 0.5 <= large[2]
    assert large[2] - large[1] < small[2] - small[1]
    assert paired_interval([], o) is None
    constant: Any = paired_interval([0.25] * 7, o)
    assert constant == pytest.approx((0.25, 0.25, 0.25))
