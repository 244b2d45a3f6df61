"""Stratum `failed_check`: an answer a deterministic check failed is queued for review in its own stratum,
with its inclusion probability, the failed check as the reason (real Redis, PostgreSQL); a failed
request (the trace's error) is queued in no stratum."""

from __future__ import annotations

from typing import Any

import pytest

from tests.workers.review.helpers import trace_event
from tests.workers.review.test_review_processor import items, val


def test_an_answer_citing_a_phantom_is_queued_in_its_own_stratum(make: Any, review_db_url: str) -> None:
    proc, reg = make(failed_check_rate=1.0, capacity_per_day=10_000)
    phantom = {"answer": {"text": "answer", "citations": ["d404"]}}
    proc.process(
        [
            trace_event(1, sample_rate=0.5, **phantom),
            trace_event(2),
            trace_event(3, variant="cand-a", **phantom),
        ]
    )
    got = items(review_db_url)
    assert set(got) == {"trace-1"}  # the clean answer and the candidate's are not queued
    stratum, reason, p = got["trace-1"][:3]
    assert (stratum, reason) == ("failed_check", "check_citations_known")
    assert p == pytest.approx(0.5)  # failed_check_rate 1.0 x the app's sample rate
    assert val(reg, "ragmon_review_queued_total", tenant="acme", stratum="failed_check") == 1


def test_a_failed_request_is_queued_in_no_stratum(make: Any, review_db_url: str) -> None:
    proc, _ = make(blind_rate=1.0, failed_check_rate=1.0)
    proc.process([trace_event(5, error={"type": "timeout"}, answer={"text": "", "citations": ["d404"]})])
    assert items(review_db_url) == {}
