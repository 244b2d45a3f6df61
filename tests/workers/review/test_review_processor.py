"""The review sampler against real Redis and real PostgreSQL: strata, probabilities, capacity, exactly-once."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import redis
from prometheus_client import CollectorRegistry

from service.contracts import reviewdb
from tests.workers.review.helpers import exclusion_event, faithfulness_event, feedback_event, trace_event
from workers.review.config import ReviewConfig
from workers.review.metrics import ReviewMetrics
from workers.review.processor import ReviewProcessor
from workers.review.store import QueueStore


def items(url: str) -> dict[str, tuple[Any, ...]]:
    with reviewdb.connect(url) as conn:
        rows = conn.execute(
            "SELECT trace_id, stratum, reason, inclusion_probability, faithfulness_score, "
            "falsely_excluded, reviews_wanted, content->>'query', policy_version FROM review_item"
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def val(reg: CollectorRegistry, name: str, **labels: str) -> float:
    return reg.get_sample_value(name, labels) or 0.0


def test_blind_sample_keeps_inclusion_probability_and_skips_shadow(make: Any, review_db_url: str) -> None:
    proc, reg = make(blind_rate=1.0)
    proc.process([trace_event(1, sample_rate=0.25), trace_event(2, variant="cand-a")])
    got = items(review_db_url)
    assert set(got) == {"trace-1"}
    stratum, reason, p, score, _, _, query, policy = got["trace-1"]
    assert (stratum, reason, score, query) == ("blind", "random", None, "question 1")
    assert p == pytest.approx(0.25)  # blind rate 1.0 x the app's sample rate
    assert policy.startswith("review-")
    assert val(reg, "ragmon_review_queued_total", tenant="acme", stratum="blind") == 1
    # A later score attaches to the queued item and counts toward the scored population.
    proc.process([faithfulness_event(1, 0.9)])
    assert items(review_db_url)["trace-1"][3] == pytest.approx(0.9)
    assert val(reg, "ragmon_review_scored_traces_total", tenant="acme") == 1


def test_low_confidence_below_near_no_claims_and_excluded(make: Any, review_db_url: str) -> None:
    proc, reg = make(near_margin=0.1)
    proc.process([trace_event(i) for i in range(1, 7)])
    assert items(review_db_url) == {}
    proc.process(
        [
            faithfulness_event(1, 0.2),
            faithfulness_event(2, 0.55),
            faithfulness_event(3, 0.9),
            faithfulness_event(4, None, outcome="no_claims"),
            exclusion_event(5, True),
            exclusion_event(6, None),
        ]
    )
    got = items(review_db_url)
    assert {k: v[:2] for k, v in got.items()} == {
        "trace-1": ("low_confidence", "below_threshold"),
        "trace-2": ("low_confidence", "near_threshold"),
        "trace-4": ("low_confidence", "no_claims"),
        "trace-5": ("low_confidence", "falsely_excluded"),
    }
    assert got["trace-1"][2] == pytest.approx(0.5)  # queued at rate 1.0 x the scorer's 0.5 sample rate
    assert got["trace-5"][2] == pytest.approx(1.0)
    assert got["trace-1"][3] == pytest.approx(0.2) and got["trace-5"][4] is True
    assert val(reg, "ragmon_review_queued_total", tenant="acme", stratum="low_confidence") == 4


def test_selection_before_its_trace_waits_for_it(make: Any, review_db_url: str) -> None:
    proc, reg = make()
    proc.process([feedback_event(7, "thumbs", False), faithfulness_event(8, 0.1)])
    assert items(review_db_url) == {}
    assert val(reg, "ragmon_review_triggers_parked_total", tenant="acme", stratum="negative_feedback") == 1
    proc.process([trace_event(7), trace_event(8)])
    got = items(review_db_url)
    assert got["trace-7"][:2] == ("negative_feedback", "thumbs_down")
    assert got["trace-8"][:2] == ("low_confidence", "below_threshold")
    assert got["trace-8"][3] == pytest.approx(0.1)  # the early score was kept with the trigger


def test_negative_feedback_kinds(make: Any, review_db_url: str) -> None:
    proc, _ = make()
    proc.process([trace_event(i) for i in range(1, 4)])
    proc.process(
        [
            feedback_event(1, "thumbs", False),
            feedback_event(2, "regenerate", None),
            feedback_event(3, "thumbs", True),
        ]
    )
    got = items(review_db_url)
    assert {k: v[1] for k, v in got.items()} == {"trace-1": "thumbs_down", "trace-2": "regenerated"}


def test_blind_wins_within_a_batch_and_a_trace_is_never_queued_twice(make: Any, review_db_url: str) -> None:
    proc, reg = make(blind_rate=1.0)
    proc.process([feedback_event(1, "thumbs", False), trace_event(1), faithfulness_event(1, 0.1)])
    proc.process([feedback_event(1, "regenerate", None)])
    got = items(review_db_url)
    assert got["trace-1"][0] == "blind" and len(got) == 1
    assert val(reg, "ragmon_review_queued_total", tenant="acme", stratum="blind") == 1


def test_daily_capacity_shares_and_overflow_counted_once(make: Any, review_db_url: str) -> None:
    proc, reg = make(blind_rate=1.0, capacity_per_day=10, shares={"blind": 0.5, "low_confidence": 0.5})
    batch = [trace_event(i, offset=100 + i) for i in range(8)]
    proc.process(batch)
    assert len(items(review_db_url)) == 5
    assert val(reg, "ragmon_review_overflow_total", tenant="acme", stratum="blind") == 3
    # The same records redelivered (a crash before the Kafka commit): nothing counts twice.
    again, reg2 = make(blind_rate=1.0, capacity_per_day=10, shares={"blind": 0.5, "low_confidence": 0.5})
    again.process(batch)
    with reviewdb.connect(review_db_url) as conn:
        assert conn.execute(
            "SELECT admitted, overflow FROM review_quota WHERE stratum = 'blind'"
        ).fetchone() == (5, 3)
    assert val(reg2, "ragmon_review_overflow_total", tenant="acme", stratum="blind") == 0


def test_double_review_share(make: Any, review_db_url: str) -> None:
    proc, _ = make(blind_rate=1.0, capacity_per_day=1000, double_review_share=0.3)
    proc.process([trace_event(i) for i in range(200)])
    wanted = [v[5] for v in items(review_db_url).values()]
    assert 40 < wanted.count(2) < 80 and set(wanted) == {1, 2}


def test_gauges_from_the_store(make: Any, review_db_url: str) -> None:
    proc, reg = make(blind_rate=1.0)
    proc.process([trace_event(1), trace_event(2)])
    proc.refresh_gauges()
    assert val(reg, "ragmon_review_queue_waiting_traces", tenant="acme", stratum="blind") == 2
    assert val(reg, "ragmon_review_queue_waiting_traces", tenant="acme", stratum="low_confidence") == 0
    assert val(reg, "ragmon_review_oldest_waiting_duration_seconds", tenant="acme", stratum="blind") >= 0


def test_store_outage_raises_for_a_retry(make: Any, review_db_url: str) -> None:
    proc, _ = make(blind_rate=1.0)
    proc.store.url = review_db_url.rsplit("/", 1)[0] + "/no_such_database"
    proc.store._conn = None
    with pytest.raises((ConnectionError, psycopg.Error)):
        proc.process([trace_event(1)])


def test_unreachable_store_makes_the_worker_not_ready(review_db_url: str, redis_client: redis.Redis) -> None:
    cfg = ReviewConfig()
    bad = QueueStore(review_db_url.rsplit("/", 1)[0] + "/no_such_database", cfg, "config-test")
    proc = ReviewProcessor(cfg, ReviewMetrics(CollectorRegistry()), redis_client, bad)
    readiness = proc.readiness()
    assert not readiness.ready and "review store unreachable" in readiness.reason
    proc.store.url, proc.store_ready.next_try = review_db_url, 0.0
    assert proc.readiness().ready
    proc.close()


def test_config_shares_must_fit_one_capacity(tmp_path: Any) -> None:
    from service.contracts.config import ConfigError, load_section

    path = tmp_path / "ragmon.yaml"
    path.write_text("review:\n  shares: {blind: 0.7, low_confidence: 0.5}\n")
    with pytest.raises(ConfigError, match=r"review.shares: .*shares add up to 1.200"):
        load_section("review", ReviewConfig, path)
    path.write_text("review:\n  shares: {blind: 0.5, thumbs: 0.5}\n")
    with pytest.raises(ConfigError, match=r"review.shares.thumbs"):
        load_section("review", ReviewConfig, path)
    assert ReviewConfig(capacity_per_day=10, tenant_capacity={"acme": 100}).quota("acme", "blind") == 40


def test_a_nul_character_in_a_trace_is_queued_with_a_replacement_never_a_stalled_batch(
    make: Any, review_db_url: str
) -> None:
    """JSON allows \\u0000 and the contract takes it in any text; PostgreSQL's jsonb cannot hold it. Before,
    the item's INSERT raised DataError, an outage to the runtime: the batch was retried for ever and the
    review queue stalled for every tenant. The character is stored as U+FFFD and the rest of the batch
    queues."""
    proc, reg = make(blind_rate=1.0)
    proc.process(
        [
            trace_event(1, query={"text": "question\x00 1"}, answer={"text": "a\x00b", "citations": ["d1"]}),
            trace_event(2, tenant="globex"),
        ]
    )
    got = items(review_db_url)
    assert set(got) == {"trace-1", "trace-2"}
    assert got["trace-1"][6] == "question\ufffd 1"
    with reviewdb.connect(review_db_url) as conn:
        [(answer,)] = conn.execute(
            "SELECT content->>'answer' FROM review_item WHERE trace_id = 'trace-1'"
        ).fetchall()
    assert answer == "a\ufffdb"
    assert val(reg, "ragmon_review_queued_total", tenant="globex", stratum="blind") == 1
