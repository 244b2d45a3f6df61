"""Calibration and the golden set from a real review store: CLI, page, stored results, worker gauges."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.contracts import reviewdb
from service.review.calibrate import in_selection_half
from service.review.reports import all_reports
from service.review.stats import Confusion, balanced_accuracy, cohen_kappa
from service.review.store import LabelInput, ReviewStore, open_pool
from tests.service.api.api_harness import RunningApi
from tests.service.review.review_harness import ANN_KEY, item_ids, seed_queue, signed_in
from workers.review.config import ReviewConfig
from workers.review.metrics import ReviewMetrics
from workers.review.processor import ReviewProcessor
from workers.review.store import QueueStore

N = 80


def _label_all(url: str, rng: random.Random, scores: dict[int, float], reviewers: tuple[str, ...]) -> None:
    pool = open_pool(url, max_size=2)
    store = ReviewStore(pool)
    try:
        for item_id, n in zip(item_ids(url), sorted(scores), strict=True):
            truth = scores[n] > 0.5 if rng.random() < 0.85 else scores[n] <= 0.5
            for reviewer in reviewers:
                agree = truth if rng.random() < 0.9 else not truth
                with (
                    pool.connection() as conn
                ):  # the queue leased the item to this reviewer (as /review/next does)
                    conn.execute(
                        "INSERT INTO review_assignment (item_id, reviewer, expires_at) "
                        "VALUES (%s, %s, now() + interval '1 hour') ON CONFLICT DO NOTHING",
                        (item_id, reviewer),
                    )
                store.save_label(item_id, "acme", reviewer, LabelInput(agree, True, [f"d{n}"], None, None))
    finally:
        pool.close()


@pytest.fixture
def labelled(review_db_url: str, redis_client: redis.Redis) -> str:
    rng = random.Random(4)
    scores = {n: round(rng.random(), 3) for n in range(1, N + 1)}
    seed_queue(
        review_db_url,
        redis_client,
        list(scores),
        scores=scores,
        double_review_share=1.0,
        overrides={
            n: {
                "session_id": f"s{n // 3}",  # sessions of up to three traces, for the golden split
                "retrieval": {
                    "documents": [
                        {"id": f"d{n}", "text": "t", "score": 0.9},
                        {"id": f"e{n}", "text": "u", "score": 0.2},
                    ]
                },
            }
            for n in scores
        },
    )
    _label_all(review_db_url, rng, scores, ("ann", "bob"))
    return review_db_url


def test_reports_from_the_store(labelled: str) -> None:
    with reviewdb.connect(labelled) as conn:
        reports = all_reports(conn, "acme", proxy_threshold=0.75)
    f = reports["faithfulness"]
    assert f["n"] == N and f["n_selection"] + f["n_heldout"] == N
    assert f["configured"]["threshold"] == 0.5 and f["configured"]["kappa"]["kappa"] > 0.3
    assert f["verdict"] == "label_more"  # 80 labels: the held-out interval is wider than 0.2
    proxy = reports["exclusion_proxy"]
    assert proxy["n"] == 2 * N and proxy["configured"]["balanced_accuracy"]["value"] == pytest.approx(1.0)
    assert reports["reviewers"]["n"] == N and 0.5 < reports["reviewers"]["kappa"]["kappa"] < 0.9
    rate = reports["faithful_rate"]
    assert rate["scored"] == N and rate["labelled"] == N
    assert rate["ppi_interval"]["low"] <= rate["ppi_rate"] <= rate["ppi_interval"]["high"]
    assert rate["reweighted"]["labelled"] == N  # all blind with π = 1: the plain share of faithful labels
    with reviewdb.connect(labelled) as conn:
        faithful = conn.execute(
            "SELECT avg(f::int) FROM (SELECT DISTINCT ON (item_id) faithful AS f FROM "
            "review_label ORDER BY item_id, labelled_at, id) x"
        ).fetchone()
    assert faithful is not None and rate["reweighted"]["rate"] == pytest.approx(float(faithful[0]))


def test_population_figures_weigh_each_item_by_its_inclusion_probability(labelled: str) -> None:
    """A third of the items queued at π = 0.1 (each stands for ten production traces), the rest at π = 1:
    the population figures are those of the list where each such item counts ten times and every other
    item once (reference: the plain statistics of that expanded list); the reviewed-mix figures stay."""
    with reviewdb.connect(labelled) as conn:
        before = all_reports(conn, "acme", proxy_threshold=0.75)
        conn.execute(
            "UPDATE review_item SET inclusion_probability = 0.1, stratum = 'low_confidence' WHERE id % 3 = 0"
        )
        reports = all_reports(conn, "acme", proxy_threshold=0.75)
        rows = conn.execute(
            "SELECT DISTINCT ON (l.item_id) i.trace_id, i.faithfulness_score, l.faithful, "
            "i.inclusion_probability FROM review_label l JOIN review_item i ON i.id = l.item_id "
            "ORDER BY l.item_id, l.labelled_at, l.id"
        ).fetchall()
    configured = reports["faithfulness"]["configured"]
    assert configured["kappa"] == before["faithfulness"]["configured"]["kappa"]  # the reviewed mix: unchanged
    truth, judge = [], []
    for trace_id, score, faithful, pi in rows:
        if in_selection_half(trace_id):
            continue
        copies = 10 if pi == pytest.approx(0.1) else 1  # weight 1/π as whole copies
        truth += [bool(faithful)] * copies
        judge += [score >= 0.5] * copies
    expected = cohen_kappa(Confusion.of(truth, judge))
    assert expected is not None and expected.kappa is not None
    population = configured["population"]
    assert population["kappa"]["value"] == pytest.approx(expected.kappa)
    assert population["balanced_accuracy"]["value"] == pytest.approx(balanced_accuracy(truth, judge).value)
    assert (
        population["kappa"]["interval"]["low"]
        <= population["kappa"]["value"]
        <= population["kappa"]["interval"]["high"]
    )
    assert population["kappa"]["effective_n"] < configured["kappa"]["n"]  # unequal weights cost precision
    rate = reports["faithful_rate"]["reweighted"]
    labels = [(bool(f), 10 if p == pytest.approx(0.1) else 1) for _, _, f, p in rows]
    assert rate["rate"] == pytest.approx(sum(c for f, c in labels if f) / sum(c for _, c in labels))
    assert rate["unweighted_rate"] == pytest.approx(sum(f for f, _ in labels) / len(labels))
    assert rate["interval"]["low"] <= rate["rate"] <= rate["interval"]["high"]


def _ragmon(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGMON_DATABASE_URL": url, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_calibrate_and_golden_export_commands(labelled: str, tmp_path: Path) -> None:
    done = _ragmon(labelled, "calibrate", "faithfulness", "--tenant", "acme", "--max-width", "0.5")
    assert done.returncode == 0, done.stderr
    assert (
        f"faithfulness: n={N}" in done.stdout and "configured" in done.stdout and "suggested" in done.stdout
    )
    assert "population (1/π)" in done.stdout
    out = tmp_path / "golden.jsonl"
    done = _ragmon(labelled, "golden", "export", "--tenant", "acme", "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == N
    row = rows[0]
    assert (
        row["versions"]["scorer"].startswith("/models/hhem@abab")
        and row["versions"]["config"] == "config-test"
    )
    assert row["versions"]["policy"].startswith("review-") and len(row["labels"]) == 2
    assert row["query"] and row["documents"] and row["gold_ids"] == [f"d{row['trace_id'].split('-')[1]}"]
    n = int(row["trace_id"].split("-")[1])
    assert (row["intent"], row["variant"], row["release"], row["session_id"]) == (
        "billing",
        "production",
        "v1",
        f"s{n // 3}",
    )
    assert _ragmon(labelled, "golden", "export", "--tenant", "globex").stdout == ""
    sets = tmp_path / "sets"
    done = _ragmon(
        labelled, "golden", "split", "--input", str(out), "--out-dir", str(sets), "--resamples", "200"
    )
    assert done.returncode == 0, done.stderr
    where: dict[str, set[str]] = {}
    for path in sets.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            where.setdefault(json.loads(line)["session_id"], set()).add(path.stem)
    assert len(where) == N // 3 + 1 and all(len(names) == 1 for names in where.values())


def test_calibration_page_and_worker_gauges(
    labelled: str, kafka_bootstrap: str, redis_url: str, topic_prefix: str, redis_client: redis.Redis
) -> None:
    from tests.service.review.review_harness import review_settings

    api = RunningApi(review_settings(kafka_bootstrap, redis_url, topic_prefix, labelled)).start()
    try:
        with signed_in(api.url, ANN_KEY) as ann:
            page = ann.get("/review/calibration")
            assert (
                page.status_code == 200
                and "Cohen's kappa, population" in page.text
                and "Prediction-powered" in page.text
            )
            assert "reviewed mix" in page.text and "unweighted share" in page.text
            assert (
                "Implicit signals against blind review" in page.text and "<th>thumbs_down</th>" in page.text
            )
    finally:
        api.stop()
    registry = CollectorRegistry()
    store = QueueStore(labelled, ReviewConfig(), "config-test")
    proc = ReviewProcessor(ReviewConfig(), ReviewMetrics(registry), redis_client, store)
    try:
        proc.refresh_gauges()
    finally:
        proc.close()
    kappa = registry.get_sample_value(
        "ragmon_review_judge_kappa", {"tenant": "acme", "judge": "faithfulness", "weighting": "reviewed"}
    )
    assert kappa is not None and kappa > 0.3
    # every item blind at π = 1 here: the population figure is the reviewed one
    assert registry.get_sample_value(
        "ragmon_review_judge_kappa", {"tenant": "acme", "judge": "faithfulness", "weighting": "population"}
    ) == pytest.approx(kappa)
    ppi = registry.get_sample_value(
        "ragmon_review_faithful_ratio", {"tenant": "acme", "estimate": "prediction_powered"}
    )
    assert ppi is not None and 0 < ppi < 1
    assert registry.get_sample_value("ragmon_review_reviewer_kappa", {"tenant": "acme"}) is not None
    assert registry.get_sample_value("ragmon_review_labelled_last_day_traces", {"tenant": "acme"}) == 2 * N
