"""`ragmon golden split`: sessions never shared, intents stratified, stable, coverage numbers by hand."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from service.cli import main
from service.review.coverage import coverage, metric_values, precision
from service.review.split import (
    DEFAULT_SHARES,
    SETS,
    SplitError,
    assign,
    parse_item,
    parse_shares,
    quotas,
    read_golden,
    split,
)

SIZES = {"billing": 400, "returns": 100, "legal": 7}  # sessions per intent


def _rows(seed: int = 0) -> list[dict]:
    """Sessions of 1-4 items; 1 in 10 sessions strays into another intent for one item; 50 items without a
    session (each its own session)."""
    rnd = random.Random(seed)
    rows: list[dict] = []
    for intent, sessions in SIZES.items():
        for s in range(sessions):
            for k in range(rnd.randint(1, 4)):
                stray = k == 1 and s % 10 == 0
                rows.append(
                    {
                        "tenant": "acme",
                        "item_id": len(rows) + 1,
                        "trace_id": f"t{len(rows) + 1}",
                        "session_id": f"{intent}-{s}",
                        "intent": "returns" if stray and intent != "returns" else intent,
                        "stratum": rnd.choice(["blind", "low_confidence", "failed_check"]),
                        "faithful": rnd.random() < 0.8,
                        "gold_ids": ["d1"],
                        "documents": [{"id": "d0"}, {"id": "d1"}],
                    }
                )
    for _ in range(50):
        rows.append(
            {"tenant": "acme", "item_id": len(rows) + 1, "trace_id": f"t{len(rows) + 1}", "intent": "billing"}
        )
    return rows


def _items(rows: list[dict]):
    return [parse_item(i + 1, row) for i, row in enumerate(rows)]


def test_no_session_is_in_two_sets() -> None:
    sets = split(_items(_rows()), DEFAULT_SHARES)
    where: dict[str, set[str]] = defaultdict(set)
    for name, members in sets.items():
        for item in members:
            where[item.session].add(name)
    assert where and all(len(names) == 1 for names in where.values())
    assert sum(len(m) for m in sets.values()) == len(_rows())  # nothing lost, nothing twice
    # the items without a session are sessions of their own, spread like the rest
    loose = {i.session for m in sets.values() for i in m if "trace:" in i.session}
    assert len(loose) == 50


def test_every_intent_gives_each_set_its_share_of_sessions_to_within_one() -> None:
    items = _items(_rows())
    where = assign(items, DEFAULT_SHARES)
    sessions_of = {
        i.session: i.session.split("\0")[1].rsplit("-", 1)[0] for i in items if "trace:" not in i.session
    }
    per_intent: dict[str, Counter[str]] = defaultdict(Counter)
    for session, intent in sessions_of.items():
        per_intent[intent][where[session]] += 1
    for intent, sessions in SIZES.items():
        if intent == "billing":
            sessions += 50  # the loose items are billing sessions of one item
            per_intent[intent].update(where[i.session] for i in items if "trace:" in i.session)
        for name in SETS:
            assert abs(per_intent[intent][name] - DEFAULT_SHARES[name] * sessions) < 1, (intent, name)


def test_the_split_is_deterministic_and_the_salt_changes_it() -> None:
    rows = _rows()
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    first = assign(_items(rows), DEFAULT_SHARES)
    assert assign(_items(shuffled), DEFAULT_SHARES) == first
    other = assign(_items(rows), DEFAULT_SHARES, salt="2027")
    moved = sum(first[s] != other[s] for s in first)
    assert 0.3 * len(first) < moved < 0.9 * len(first)


def test_quotas_by_largest_remainder() -> None:
    shares = [0.4, 0.2, 0.3, 0.1]
    assert quotas(10, shares) == [4, 2, 3, 1]
    assert quotas(1, shares) == [1, 0, 0, 0]
    assert quotas(2, shares) == [1, 0, 1, 0]  # remainders .8 .4 .6 .2
    assert quotas(7, shares) == [3, 1, 2, 1]  # 2.8 1.4 2.1 0.7 -> floors 2 1 2 0, two more to .8 and .7
    assert all(sum(quotas(n, shares)) == n for n in range(50))


def test_hand_checked_wilson_half_width_and_labels_needed() -> None:
    # 8 faithful of 10, z = 1.959964: denominator 1 + z^2/10 = 1.384146, centre (0.8 + 0.192073)/1.384146
    # = 0.716741, half (z/1.384146) * sqrt(0.016 + 0.00096040... ) -> interval [0.490162, 0.943318]
    p = precision(np.array([1.0] * 8 + [0.0] * 2), target=0.02)
    assert p["n"] == 10 and p["value"] == pytest.approx(0.8) and p["method"] == "wilson"
    assert p["half_width"] == pytest.approx(0.8 - 0.490162, abs=1e-5)
    assert not p["sees_target"]
    # (z * sqrt(0.8 * 0.2) / 0.02)^2 = (1.959964 * 0.4 / 0.02)^2 = 1536.5 -> 1537 labels
    assert p["n_for_target"] == 1537
    assert precision(np.array([np.nan, np.nan]), 0.02)["value"] is None  # no data, never 0


def test_recall_per_item_and_the_coverage_table_by_hand(tmp_path: Path) -> None:
    rows = [
        # context d0 d1, gold d1 d9: recall@1 0, recall@2 (= @5) 0.5
        {"item_id": 1, "trace_id": "a", "intent": "x", "stratum": "blind", "gold_ids": ["d1", "d9"],
         "documents": [{"id": "d0"}, {"id": "d1"}]},
        # gold found first: recall 1
        {"item_id": 2, "trace_id": "b", "intent": "x", "stratum": "drift", "gold_ids": ["d0"],
         "documents": [{"id": "d0"}]},
        # no gold: no data
        {"item_id": 3, "trace_id": "c", "intent": "y", "stratum": "blind", "gold_ids": [],
         "documents": [{"id": "d0"}]},
    ]  # fmt: skip
    items = _items(rows)
    assert metric_values(items, "context.recall@5")[:2].tolist() == [0.5, 1.0]
    assert np.isnan(metric_values(items, "context.recall@5")[2])
    assert metric_values(items, "context.recall@1")[:2].tolist() == [0.0, 1.0]
    report = coverage({"release_gate": items}, "context.recall@5", 0.02, resamples=200)
    assert report["cells"] == [
        {"set": "release_gate", "intent": "x", "stratum": "blind", "n": 1},
        {"set": "release_gate", "intent": "x", "stratum": "drift", "n": 1},
        {"set": "release_gate", "intent": "y", "stratum": "blind", "n": 1},
    ]
    gate = next(s for s in report["sets"] if s["set"] == "release_gate")
    assert (gate["items"], gate["sessions"], gate["n"], gate["value"]) == (3, 3, 2, 0.75)
    assert gate["method"] == "bootstrap" and gate["half_width"] == pytest.approx(0.25)  # resamples 0.5..1


def test_bad_input_names_the_line_the_field_and_the_rule() -> None:
    good = json.dumps({"item_id": 1, "trace_id": "t", "gold_ids": []})
    cases = {
        "{not json": "line 1: not JSON",
        "[1]": "line 1: must be a JSON object",
        json.dumps({"trace_id": "t"}): "line 1: field 'item_id': must be a string or an integer",
        json.dumps(
            {"item_id": 1, "trace_id": "t", "gold_ids": "d1"}
        ): "line 1: field 'gold_ids': must be a list",
        json.dumps({"item_id": 1}): "line 1: field 'trace_id': required when 'session_id' is null",
        json.dumps(
            {"item_id": 1, "trace_id": "t", "intent": 3}
        ): "line 1: field 'intent': must be a non-empty",
    }
    for line, message in cases.items():
        with pytest.raises(SplitError, match=message.replace("(", r"\(")):
            read_golden([line])
    with pytest.raises(SplitError, match="line 2: field 'item_id': '1' is already on line 1"):
        read_golden([good, good])
    with pytest.raises(SplitError, match="sum to 0.9"):
        parse_shares("development=0.5,release_gate=0.4")
    with pytest.raises(SplitError, match="'gate' is not one of"):
        parse_shares("gate=1")
    assert parse_shares("release_gate=1")["release_gate"] == 1.0


def test_the_cli_writes_four_sets_and_the_coverage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "golden.jsonl"
    rows = _rows()
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "sets"
    assert main(["golden", "split", "--input", str(src), "--out-dir", str(out), "--resamples", "200"]) == 0
    printed = capsys.readouterr().out
    assert "| release_gate |" in printed and "sees ±target" in printed
    written = {
        name: [json.loads(x) for x in (out / f"{name}.jsonl").read_text().splitlines()] for name in SETS
    }
    assert sorted(r["item_id"] for rs in written.values() for r in rs) == [r["item_id"] for r in rows]
    assert all(r["split"] == name for name, rs in written.items() for r in rs)
    report = json.loads((out / "coverage.json").read_text())
    assert sum(c["n"] for c in report["cells"]) == len(rows)
    first = {name: (out / f"{name}.jsonl").read_text() for name in SETS}
    assert main(["golden", "split", "--input", str(src), "--out-dir", str(out), "--resamples", "200"]) == 0
    assert {name: (out / f"{name}.jsonl").read_text() for name in SETS} == first  # re-running is stable
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[0]) + "\n" + json.dumps({**rows[1], "gold_ids": [1]}) + "\n")
    capsys.readouterr()
    assert main(["golden", "split", "--input", str(bad), "--out-dir", str(out)]) == 2
    assert "bad.jsonl: line 2: field 'gold_ids'" in capsys.readouterr().err
    assert main(["golden", "split", "--input", str(src), "--metric", "recall"]) == 2
    assert "--metric: 'recall' is not" in capsys.readouterr().err
