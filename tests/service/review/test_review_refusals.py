"""`ragmon calibrate refusals`: false refusals and false answers against reviewers' `answerable` labels, and
the threshold trade-off on the best retrieval score (service/review/refusals.py), on hand-made items and
through the review store and the command."""

from __future__ import annotations

import json
import random

import pytest
import redis

from service.contracts import reviewdb
from service.review.calibrate import in_selection_half
from service.review.refusals import RefusalItem, at_threshold, best_threshold, error_rates, refusal_report
from service.review.reports import refusals_report
from service.review.store import LabelInput
from tests.service.review.review_harness import label_every_item, seed_queue
from tests.service.review.test_review_reports import _ragmon


def _items(answerable: list[tuple[bool, float | None]], unanswerable: list[tuple[bool, float | None]]):
    out = [RefusalItem(f"a{k}", refused, True, c) for k, (refused, c) in enumerate(answerable)]
    return out + [RefusalItem(f"u{k}", refused, False, c) for k, (refused, c) in enumerate(unanswerable)]


def test_each_error_is_a_rate_of_its_own_class_with_an_interval() -> None:
    items = _items([(k < 2, None) for k in range(10)], [(k < 7, None) for k in range(10)])
    rates = error_rates(items)
    fr, fa = rates["false_refusals"], rates["false_answers"]
    assert (fr["count"], fr["n"], fr["value"]) == (2, 10, pytest.approx(0.2))
    assert (fa["count"], fa["n"], fa["value"]) == (3, 10, pytest.approx(0.3))
    assert fr["interval"]["low"] < 0.2 < fr["interval"]["high"] < 0.6
    assert fr["population"]["value"] == pytest.approx(0.2)  # every weight 1: the plain share


def test_an_empty_class_is_no_data_not_zero() -> None:
    rates = error_rates(_items([(False, None)] * 5, []))
    assert rates["false_answers"]["value"] is None and rates["false_answers"]["interval"] is None
    assert rates["false_refusals"]["value"] == 0.0


def test_population_figures_weigh_by_inclusion_probability() -> None:
    # Refused answerable questions were oversampled (π = 0.5 each); the answered ones stand for 10 each.
    items = [RefusalItem(f"r{k}", True, True, weight=2.0, stratum="thumbs_down") for k in range(10)]
    items += [RefusalItem(f"a{k}", False, True, weight=10.0, stratum="blind") for k in range(10)]
    fr = error_rates(items)["false_refusals"]
    assert fr["value"] == pytest.approx(0.5)
    assert fr["population"]["value"] == pytest.approx(20 / 120)


def test_the_gate_trades_false_answers_for_false_refusals() -> None:
    items = _items(
        [(False, c) for c in (0.55, 0.6, 0.7, 0.8, 0.9)], [(False, c) for c in (0.1, 0.2, 0.3, 0.4, 0.65)]
    )
    low, high = at_threshold(0.5, items), at_threshold(0.75, items)
    assert low["false_refusals"]["value"] == 0.0 and low["false_answers"]["value"] == pytest.approx(0.2)
    assert high["false_refusals"]["value"] == pytest.approx(0.6) and high["false_answers"]["value"] == 0.0
    # No unanswerable question past the gate: just above the highest unanswerable score (0.65).
    assert best_threshold(items, 0.0) == pytest.approx(0.7)
    assert best_threshold(items, 0.2) == pytest.approx(0.55)  # one of five (0.65) may pass
    assert best_threshold(_items([(False, 0.9)], []), 0.1) is None  # one class only: nothing to trade


def test_too_few_labels_say_so() -> None:
    report = refusal_report(_items([(False, 0.9)] * 40, [(True, 0.1)] * 5), min_labels=30)
    assert report["verdict"] == "label_more" and report["suggested"] is None
    assert "40 answerable and 5 not answerable" in report["message"]


def test_a_threshold_is_chosen_on_one_half_and_checked_on_the_other() -> None:
    rng = random.Random(7)
    items = [RefusalItem(f"t{k}", False, True, rng.uniform(0.4, 1.0)) for k in range(600)]
    items += [RefusalItem(f"n{k}", True, False, rng.uniform(0.0, 0.6)) for k in range(600)]
    report = refusal_report(items, max_false_answers=0.05, min_labels=30)
    assert report["n_selection"] + report["n_heldout"] == 1200
    selection = [i for i in items if in_selection_half(i.item)]
    chosen = report["suggested"]["threshold"]
    assert chosen == best_threshold(selection, 0.05)
    # unanswerable scores are uniform on [0, 0.6]: 5% of them are above 0.57
    assert 0.54 < chosen < 0.6
    held = report["suggested"]
    assert held["false_answers"]["n"] == sum(not i.answerable for i in items if not in_selection_half(i.item))
    assert held["false_answers"]["value"] <= 0.1 and 0.2 < held["false_refusals"]["value"] < 0.4
    assert report["verdict"] in ("meets", "uncertain")
    assert len(report["tradeoff"]) == 11
    # the app itself refused every unanswerable question and answered every answerable one
    assert report["app"]["false_refusals"]["value"] == 0.0 and report["app"]["false_answers"]["value"] == 0.0


def test_without_scores_the_app_rates_stand_alone() -> None:
    report = refusal_report(_items([(False, None)] * 30, [(True, None)] * 30), min_labels=30)
    assert report["verdict"] == "no_confidence" and report["tradeoff"] == []


def test_calibrate_refusals_from_the_store(review_db_url: str, redis_client: redis.Redis) -> None:
    """40 traces: 20 answerable (high best score; 4 of them refused), 20 not (low score; 6 answered)."""
    numbers = list(range(1, 41))

    def trace(n: int) -> dict:
        answerable = n <= 20
        refused = n in (1, 2, 3, 4) or (not answerable and n > 26)
        score = 0.5 + n / 100 if answerable else 0.05 + (n - 20) / 100
        return {
            "retrieval": {"documents": [{"id": f"d{n}", "text": "t", "score": score}]},
            "answer": {"text": "I don't know" if refused else "answer", "refused": refused, "citations": []},
        }

    seed_queue(review_db_url, redis_client, numbers, overrides={n: trace(n) for n in numbers})
    label_every_item(review_db_url, lambda n: LabelInput(True, n <= 20, [], None, None))
    with reviewdb.connect(review_db_url) as conn:
        report = refusals_report(conn, "acme", max_false_answers=0.0, min_labels=10)
    assert (report["answerable"], report["not_answerable"], report["with_confidence"]) == (20, 20, 40)
    assert report["app"]["false_refusals"]["count"] == 4 and report["app"]["false_answers"]["count"] == 6
    # scores separate the classes (answerable 0.51-0.70, not 0.06-0.25): a gate between them is perfect
    assert report["verdict"] == "meets" or report["suggested"]["false_answers"]["value"] == 0.0
    done = _ragmon(review_db_url, "calibrate", "refusals", "--tenant", "acme", "--min-labels", "10")
    assert done.returncode == 0, done.stderr
    assert "false refusals 0.200" in done.stdout and "(4/20" in done.stdout and "(6/20" in done.stdout
    done = _ragmon(review_db_url, "calibrate", "refusals", "--tenant", "acme", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["verdict"] == "label_more"  # 20 < 30 a class
    done = _ragmon(review_db_url, "calibrate", "refusals", "--tenant", "acme", "--max-false-answers", "2")
    assert done.returncode == 2 and "--max-false-answers" in done.stderr and "share in [0, 1]" in done.stderr
