"""Implicit signals recorded beside review items, against real Redis and PostgreSQL: feedback that comes
after the item, feedback stashed before its trace, only traces with an item, the first time each."""

from __future__ import annotations

from typing import Any

from service.contracts import reviewdb
from tests.workers.review.helpers import feedback_event, trace_event
from workers.review.plan import implicit_signal
from workers.review.views import ReviewFeedback


def signals(url: str) -> dict[str, set[str]]:
    with reviewdb.connect(url) as conn:
        rows = conn.execute("SELECT trace_id, signal FROM review_signal").fetchall()
    out: dict[str, set[str]] = {}
    for trace_id, signal in rows:
        out.setdefault(trace_id, set()).add(signal)
    return out


def test_feedback_after_the_item_is_recorded_and_traces_without_one_are_not(
    make: Any, review_db_url: str
) -> None:
    proc, _ = make(blind_rate=1.0)
    proc.process([trace_event(1), trace_event(2)])
    proc.process(
        [
            feedback_event(1, "thumbs", True),
            feedback_event(1, "copy", None),
            feedback_event(1, "copy", None),  # the same signal again: one row
            feedback_event(2, "dwell", 3.5),
            feedback_event(2, "dwell", 40),  # long: not a signal
            feedback_event(2, "citation_click", None),
            feedback_event(9, "regenerate", None),  # no item for trace-9 (never sent)
        ]
    )
    assert signals(review_db_url) == {"trace-1": {"thumbs_up", "copy"}, "trace-2": {"short_dwell"}}


def test_feedback_before_its_trace_is_stashed_and_recorded_with_the_item(
    make: Any, review_db_url: str
) -> None:
    proc, _ = make(blind_rate=1.0)
    proc.process([feedback_event(5, "regenerate", None), feedback_event(5, "edit", None)])
    assert signals(review_db_url) == {}  # no item yet
    proc.process([trace_event(5)])
    assert signals(review_db_url) == {"trace-5": {"regenerate", "edit"}}


def test_a_negative_feedback_item_carries_the_signal_that_selected_it(make: Any, review_db_url: str) -> None:
    proc, _ = make()  # no blind sample: the thumbs down itself queues the item
    proc.process([trace_event(3)])
    proc.process([feedback_event(3, "thumbs", False)])
    assert signals(review_db_url) == {"trace-3": {"thumbs_down"}}


def test_a_redelivered_batch_records_nothing_twice(make: Any, review_db_url: str) -> None:
    proc, _ = make(blind_rate=1.0)
    batch = [trace_event(4, offset=10_000), feedback_event(4, "thumbs", False, offset=10_001)]
    proc.process(batch)
    proc.process(batch)
    with reviewdb.connect(review_db_url) as conn:
        assert conn.execute("SELECT count(*) FROM review_signal").fetchone() == (1,)


def test_which_feedback_is_which_signal() -> None:
    def f(kind: str, value: Any = None) -> ReviewFeedback:
        return ReviewFeedback(trace_id="t", kind=kind, value=value)  # type: ignore[arg-type]

    assert implicit_signal(f("thumbs", False), 10) == "thumbs_down"
    assert implicit_signal(f("thumbs", -1), 10) == "thumbs_down"
    assert implicit_signal(f("thumbs", 1), 10) == "thumbs_up"
    assert implicit_signal(f("regenerate"), 10) == "regenerate"
    assert implicit_signal(f("dwell", 9.9), 10) == "short_dwell"
    assert implicit_signal(f("dwell", 10), 10) is None
    assert implicit_signal(f("followup"), 10) is None
