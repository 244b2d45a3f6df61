"""`ragmon calibrate signals`: each implicit signal against blind review (service/review/signals.py), on
hand-made items and through the real sampler, the review store and the command."""

from __future__ import annotations

import json

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.contracts import reviewdb
from service.review.reports import signals_report
from service.review.signals import SignalItem, signal_report, verdict
from service.review.store import LabelInput
from tests.service.review.review_harness import label_every_item, seed_queue
from tests.service.review.test_review_reports import _ragmon
from tests.workers.review.helpers import feedback_event
from workers.review.config import ReviewConfig
from workers.review.metrics import ReviewMetrics
from workers.review.processor import ReviewProcessor
from workers.review.store import QueueStore


def _reading(report: dict, signal: str) -> dict:
    return next(s for s in report["signals"] if s["signal"] == signal)


def test_verdicts_from_labels() -> None:
    assert verdict(False, None) is True and verdict(True, "unsupported_claim") is True
    assert verdict(True, None) is False and verdict(True, "") is False
    assert verdict(None, None) is None and verdict(None, "other") is None and verdict(True, "other") is None


def test_precision_and_recall_of_a_negative_and_a_positive_signal() -> None:
    # 20 wrong (8 with thumbs down), 80 right (2 with thumbs down, 40 copied)
    items = [SignalItem(f"w{k}", True, frozenset({"thumbs_down"} if k < 8 else ())) for k in range(20)]
    items += [
        SignalItem(
            f"r{k}", False, frozenset(({"thumbs_down"} if k < 2 else set()) | ({"copy"} if k < 40 else set()))
        )
        for k in range(80)
    ]
    report = signal_report(items, min_labels=5)
    down = _reading(report, "thumbs_down")
    assert down["predicts"] == "wrong" and down["with_signal"] == 10 and down["of_verdict"] == 20
    assert down["precision"]["value"] == pytest.approx(0.8) and down["recall"]["value"] == pytest.approx(0.4)
    assert down["precision"]["interval"]["low"] < 0.8 < down["precision"]["interval"]["high"]
    assert down["verdict"] == "reading"
    copy = _reading(report, "copy")
    assert copy["predicts"] == "right" and copy["precision"]["value"] == 1.0
    assert copy["recall"]["value"] == pytest.approx(0.5)
    regen = _reading(report, "regenerate")  # nobody regenerated: no precision at all, recall 0
    assert regen["precision"]["value"] is None and regen["recall"]["value"] == 0.0
    assert regen["verdict"] == "label_more" and "0 labelled traces with regenerate" in regen["message"]


def test_population_figures_weigh_by_inclusion_probability() -> None:
    # the wrong answers with a thumbs down came from a low sample rate: each stands for 10
    items = [SignalItem(f"w{k}", True, frozenset({"thumbs_down"}), weight=10.0) for k in range(5)]
    items += [SignalItem(f"r{k}", False, frozenset({"thumbs_down"}), weight=1.0) for k in range(5)]
    down = _reading(signal_report(items, min_labels=1), "thumbs_down")
    assert down["precision"]["value"] == pytest.approx(0.5)
    assert down["precision"]["population"]["value"] == pytest.approx(50 / 55)


def test_calibrate_signals_from_the_store(review_db_url: str, redis_client: redis.Redis) -> None:
    """12 blind traces; 1-6 judged wrong; thumbs down on 1-4 and 7, copy on 8-12 (feedback after the items)."""
    numbers = list(range(1, 13))
    seed_queue(review_db_url, redis_client, numbers)
    config = ReviewConfig(blind_rate=1.0, capacity_per_day=10_000)
    proc = ReviewProcessor(
        config, ReviewMetrics(CollectorRegistry()), redis_client, QueueStore(review_db_url, config, "t")
    )
    try:
        proc.process(
            [feedback_event(n, "thumbs", False) for n in (1, 2, 3, 4, 7)]
            + [feedback_event(n, "copy", None) for n in (8, 9, 10, 11, 12)]
        )
    finally:
        proc.close()
    label_every_item(review_db_url, lambda n: LabelInput(n > 6, True, [], None, None))
    with reviewdb.connect(review_db_url) as conn:
        report = signals_report(conn, "acme", min_labels=3)
    assert (report["n"], report["wrong"], report["right"]) == (12, 6, 6)
    down = _reading(report, "thumbs_down")
    assert (down["precision"]["count"], down["precision"]["n"]) == (4, 5)
    assert (down["recall"]["count"], down["recall"]["n"]) == (4, 6)
    copy = _reading(report, "copy")
    assert (copy["precision"]["count"], copy["precision"]["n"], copy["recall"]["count"]) == (5, 5, 5)
    done = _ragmon(review_db_url, "calibrate", "signals", "--tenant", "acme", "--min-labels", "3")
    assert done.returncode == 0, done.stderr
    assert "| thumbs_down | wrong | 5 | 0.800" in done.stdout and "(4/5)" in done.stdout
    assert "| regenerate | wrong | 0 | no data" in done.stdout and "label more" in done.stdout
    done = _ragmon(review_db_url, "calibrate", "signals", "--tenant", "acme", "--format", "json")
    assert done.returncode == 0 and _reading(json.loads(done.stdout), "copy")["verdict"] == "label_more"
