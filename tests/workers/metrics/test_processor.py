"""The metrics processor against a real Redis: counts, cost, feedback joins both ways, releases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis
from prometheus_client import CollectorRegistry

from tests.support.decoded import decoded_event
from tests.support.kafka import stored, trace_body
from workers.metrics.config import MetricsConfig, ModelPrice
from workers.metrics.joins import FeedbackJoin, JoinInfo
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor
from workers.metrics.views import VIEWS
from workers.runtime.types import Event


def as_event(raw: dict) -> Event:  # type: ignore[type-arg]
    return decoded_event(raw, VIEWS, topic="t")


@pytest.fixture
def setup(redis_client: redis.Redis) -> tuple[MetricsProcessor, CollectorRegistry]:
    registry = CollectorRegistry()
    config = MetricsConfig(park_s=60, prices={"gpt-x": ModelPrice(prompt=1.0, completion=2.0)})
    return MetricsProcessor(config, MetricsWorkerMetrics(registry), redis_client), registry


def val(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def feedback(trace_id: str, kind: str = "thumbs", value: object = -1, reason: str | None = "wrong") -> dict:  # type: ignore[type-arg]
    return stored("feedback", {"trace_id": trace_id, "kind": kind, "value": value, "reason": reason})


def test_trace_counts_latency_cost_and_sampling_weight(
    setup: tuple[MetricsProcessor, CollectorRegistry],
) -> None:
    proc, reg = setup
    body = trace_body(
        1,
        sample_rate=0.25,
        timings={"retrieval": 20.0, "guard": 5.0, "total": 100.0},
        usage={"model": "gpt-x", "tokens": {"prompt": 1000, "completion": 500}},
    )
    assert proc.process([as_event(stored("trace", body))]) == []
    tv = {"tenant": "acme", "variant": "production"}
    assert val(reg, "ragmon_rag_queries_total", **tv, intent="billing") == 1
    assert val(reg, "ragmon_rag_queries_estimated_total", **tv, intent="billing") == 4
    assert val(reg, "ragmon_rag_stage_duration_seconds_count", **tv, stage="other") == 1
    assert val(reg, "ragmon_rag_stage_duration_seconds_sum", **tv, stage="retrieval") == pytest.approx(0.02)
    assert val(reg, "ragmon_rag_cost_queries_total", **tv, source="estimated") == 1
    assert val(reg, "ragmon_rag_cost_per_query_usd_sum", **tv, source="estimated") == pytest.approx(0.002)
    assert val(reg, "ragmon_rag_cost_estimated_usd_total", **tv, source="estimated") == pytest.approx(0.008)
    assert val(reg, "ragmon_rag_tokens_total", **tv, kind="prompt", model="gpt-x") == 1000


def test_total_ttft_and_cost_are_kept_per_intent_capped(
    setup: tuple[MetricsProcessor, CollectorRegistry],
) -> None:
    """The per-intent latency and cost guardrails' series (docs/intents.md): total and ttft (no other stage)
    and the known cost per intent, the intent capped to the configured set (the rest `other`)."""
    proc, reg = setup
    usage = {"model": "gpt-x", "tokens": {"prompt": 1000, "completion": 500}}
    timings = {"retrieval": 20.0, "ttft": 300.0, "total": 900.0}
    events = [
        as_event(stored("trace", trace_body(1, timings=timings, usage=usage))),
        as_event(stored("trace", trace_body(2, timings=timings, usage=usage, intent="a_client_invention"))),
        # no price for this model: no known cost, in neither per-intent cost series
        as_event(stored("trace", trace_body(3, timings=timings, usage={"model": "unpriced"}))),
    ]
    assert proc.process(events) == []
    tv = {"tenant": "acme", "variant": "production"}
    seconds = "ragmon_rag_intent_duration_seconds"
    assert val(reg, f"{seconds}_count", **tv, intent="billing", stage="total") == 2
    assert val(reg, f"{seconds}_sum", **tv, intent="billing", stage="ttft") == pytest.approx(0.6)
    assert val(reg, f"{seconds}_count", **tv, intent="other", stage="total") == 1
    assert reg.get_sample_value(f"{seconds}_count", {**tv, "intent": "billing", "stage": "retrieval"}) is None
    assert (
        reg.get_sample_value(f"{seconds}_count", {**tv, "intent": "a_client_invention", "stage": "total"})
        is None
    )
    assert val(reg, "ragmon_rag_intent_costed_queries_total", **tv, intent="billing") == 1
    assert val(reg, "ragmon_rag_intent_cost_usd_total", **tv, intent="billing") == pytest.approx(0.002)
    assert val(reg, "ragmon_rag_intent_costed_queries_total", **tv, intent="other") == 1


def test_refusals_and_uncited_answers(setup: tuple[MetricsProcessor, CollectorRegistry]) -> None:
    proc, reg = setup
    proc.process(
        [
            as_event(stored("trace", trace_body(1, answer={"text": "", "refused": True}))),
            as_event(stored("trace", trace_body(2, answer={"text": "x", "citations": []}))),
            as_event(stored("trace", trace_body(3))),
        ]
    )
    tvi = {"tenant": "acme", "variant": "production", "intent": "billing"}
    assert val(reg, "ragmon_rag_refusals_total", **tvi) == 1
    assert val(reg, "ragmon_rag_uncited_answers_total", **tvi) == 1


def test_feedback_after_its_trace_joins_at_once(setup: tuple[MetricsProcessor, CollectorRegistry]) -> None:
    proc, reg = setup
    proc.process([as_event(stored("trace", trace_body(1, variant="cand-a", release="v7", intent="account")))])
    proc.process([as_event(feedback("trace-1"))])
    assert (
        val(
            reg,
            "ragmon_feedback_total",
            tenant="acme",
            variant="cand-a",
            release="v7",
            intent="account",
            kind="thumbs",
            reason="wrong",
        )
        == 1
    )
    assert val(reg, "ragmon_feedback_parked_total", tenant="acme") == 0


# The labels of a trace_body(n) trace: what feedback joined to one is counted under.
JOINED = {"tenant": "acme", "variant": "production", "release": "v1", "intent": "billing"}


def test_feedback_before_its_trace_waits_then_joins(
    setup: tuple[MetricsProcessor, CollectorRegistry],
) -> None:
    proc, reg = setup
    proc.process([as_event(feedback("trace-5", kind="regenerate", value=None, reason=None))])
    assert val(reg, "ragmon_feedback_parked_total", tenant="acme") == 1
    assert val(reg, "ragmon_feedback_total", **JOINED, kind="regenerate", reason="none") == 0
    proc.process([as_event(stored("trace", trace_body(5)))])
    assert val(reg, "ragmon_feedback_total", **JOINED, kind="regenerate", reason="none") == 1
    proc.tick(datetime.now(UTC).timestamp() + 3600)
    assert val(reg, "ragmon_feedback_unjoined_total", tenant="acme", kind="regenerate", reason="none") == 0


def test_feedback_whose_trace_never_comes_is_unjoined_not_dropped(
    setup: tuple[MetricsProcessor, CollectorRegistry],
) -> None:
    proc, reg = setup
    proc.process([as_event(feedback("ghost", reason="slow"))])
    now = datetime.now(UTC).timestamp()
    proc.tick(now + 30)  # still within the park window
    assert val(reg, "ragmon_feedback_unjoined_total", tenant="acme", kind="thumbs", reason="slow") == 0
    proc.tick(now + 61)
    proc.tick(now + 62)
    assert val(reg, "ragmon_feedback_unjoined_total", tenant="acme", kind="thumbs", reason="slow") == 1


def test_parked_feedback_is_claimed_once_by_competing_processes(redis_client: redis.Redis) -> None:
    """Two joiners (two worker processes) over one Redis: a parked feedback is counted by exactly one."""
    a = FeedbackJoin(redis_client, join_ttl_s=600, park_s=10)
    b = FeedbackJoin(redis_client, join_ttl_s=600, park_s=10)
    t0 = 1_000_000.0
    for i in range(20):
        assert a.feedback_arrived("acme", f"tr{i}", f"ev{i}", {"kind": "copy"}, now=t0) is None
    # Traces for the even ones arrive via process b; the odd ones expire and both processes sweep.
    joined = [
        p
        for i in range(0, 20, 2)
        for p in b.trace_arrived("acme", f"tr{i}", f"t{i}", JoinInfo("production", None, None))
    ]
    expired_a = a.claim_expired(now=t0 + 11)
    expired_b = b.claim_expired(now=t0 + 11)
    assert sorted(p.event_id for p in joined) == sorted(f"ev{i}" for i in range(0, 20, 2))
    claimed = [p.event_id for _, p in expired_a + expired_b]
    assert sorted(claimed) == sorted(f"ev{i}" for i in range(1, 20, 2))
    assert len(claimed) == len(set(claimed))


def test_another_trace_event_does_not_recount_parked_feedback(redis_client: redis.Redis) -> None:
    join = FeedbackJoin(redis_client, join_ttl_s=600, park_s=10)
    join.feedback_arrived("acme", "tr", "ev", {"kind": "copy"})
    first = join.trace_arrived("acme", "tr", "t1", JoinInfo("production", "v1", "billing"))
    other = join.trace_arrived("acme", "tr", "t2", JoinInfo("production", "v1", "billing"))
    assert [p.event_id for p in first] == ["ev"] and other == []


def test_a_retried_trace_event_takes_the_same_parked_feedback_again(redis_client: redis.Redis) -> None:
    """The retry after a lost reply (the script ran, redis-py raised): the feedback it took is not lost."""
    join = FeedbackJoin(redis_client, join_ttl_s=600, park_s=10)
    join.feedback_arrived("acme", "tr", "ev", {"kind": "copy"})
    first = join.trace_arrived("acme", "tr", "t1", JoinInfo("production", "v1", "billing"))
    retried = join.trace_arrived("acme", "tr", "t1", JoinInfo("production", "v1", "billing"))
    assert [(p.event_id, p.first_of_kind, p.first_of_any) for p in first] == [("ev", True, True)]
    assert [(p.event_id, p.first_of_kind, p.first_of_any) for p in retried] == [("ev", True, True)]
    assert 0 < redis_client.ttl("ragmon:join:taken:acme:tr") <= 600


def test_release_markers_newest_wins_and_replace_the_info_series(
    setup: tuple[MetricsProcessor, CollectorRegistry],
) -> None:
    proc, reg = setup
    t1 = datetime.now(UTC) - timedelta(minutes=10)
    t2 = datetime.now(UTC) - timedelta(minutes=1)
    proc.process([as_event(stored("release", {"release": "v2"}, when=t2))])
    proc.process([as_event(stored("release", {"release": "v1"}, when=t1))])  # late, older marker
    proc.tick(datetime.now(UTC).timestamp())
    assert val(reg, "ragmon_release_info", tenant="acme", variant="production", release="v2") == 1
    assert val(
        reg, "ragmon_release_last_timestamp_seconds", tenant="acme", variant="production"
    ) == pytest.approx(t2.timestamp())
    proc.process([as_event(stored("release", {"release": "v3"}))])
    proc.tick(datetime.now(UTC).timestamp())
    assert (
        reg.get_sample_value(
            "ragmon_release_info", {"tenant": "acme", "variant": "production", "release": "v2"}
        )
        is None
    )
    assert val(reg, "ragmon_release_info", tenant="acme", variant="production", release="v3") == 1


def test_variant_labels_are_capped(redis_client: redis.Redis) -> None:
    registry = CollectorRegistry()
    proc = MetricsProcessor(
        MetricsConfig(max_variants_per_tenant=2), MetricsWorkerMetrics(registry), redis_client
    )
    for i, v in enumerate(["a", "b", "c", "d"]):
        proc.process([as_event(stored("trace", trace_body(i, variant=v)))])
    assert val(registry, "ragmon_rag_queries_total", tenant="acme", variant="other", intent="billing") == 2


def test_thumbs_up_and_down_are_counted_apart(setup: tuple[MetricsProcessor, CollectorRegistry]) -> None:
    """A vote changed from up to down is two events, both counted; the trace has thumbs once."""
    proc, reg = setup
    proc.process([as_event(stored("trace", trace_body(1)))])
    proc.process(
        [
            as_event(feedback("trace-1", value=True, reason=None)),
            as_event(feedback("trace-1", value=-1, reason="wrong")),
            as_event(feedback("trace-1", value=1, reason=None)),
            as_event(feedback("trace-1", value=False, reason="incomplete")),
            as_event(feedback("trace-1", value=1.0, reason=None)),
        ]
    )
    assert val(reg, "ragmon_feedback_thumbs_total", **JOINED, direction="up") == 3
    assert val(reg, "ragmon_feedback_thumbs_total", **JOINED, direction="down") == 2
    assert val(reg, "ragmon_feedback_total", **JOINED, kind="thumbs", reason="none") == 3
    assert val(reg, "ragmon_feedback_traces_total", **JOINED, kind="thumbs") == 1
    assert val(reg, "ragmon_feedback_traces_total", **JOINED, kind="any") == 1


def test_direction_dwell_and_first_of_kind_survive_waiting_for_the_trace(
    setup: tuple[MetricsProcessor, CollectorRegistry],
) -> None:
    proc, reg = setup
    proc.process(
        [
            as_event(feedback("trace-2", value=False, reason="wrong")),
            as_event(feedback("trace-2", kind="dwell", value=12.5, reason=None)),
            as_event(feedback("trace-2", kind="copy", value=None, reason=None)),
            as_event(feedback("trace-2", kind="copy", value=None, reason=None)),
        ]
    )
    assert val(reg, "ragmon_feedback_parked_total", tenant="acme") == 4
    assert val(reg, "ragmon_feedback_traces_total", **JOINED, kind="any") == 0
    proc.process([as_event(stored("trace", trace_body(2)))])
    proc.process([as_event(feedback("trace-2", kind="copy", value=None, reason=None))])  # after the trace
    assert val(reg, "ragmon_feedback_thumbs_total", **JOINED, direction="down") == 1
    assert val(reg, "ragmon_feedback_thumbs_total", **JOINED, direction="up") == 0
    tvi = {"tenant": "acme", "variant": "production", "intent": "billing"}
    assert val(reg, "ragmon_feedback_dwell_duration_seconds_count", **tvi) == 1
    assert val(reg, "ragmon_feedback_dwell_duration_seconds_sum", **tvi) == 12.5
    assert val(reg, "ragmon_feedback_total", **JOINED, kind="copy", reason="none") == 3
    assert val(reg, "ragmon_feedback_traces_total", **JOINED, kind="copy") == 1
    assert val(reg, "ragmon_feedback_traces_total", **JOINED, kind="dwell") == 1
    assert val(reg, "ragmon_feedback_traces_total", **JOINED, kind="any") == 1
    assert val(reg, "ragmon_feedback_traces_total", **JOINED, kind="edit") == 0


def test_a_retried_feedback_is_first_again_and_another_is_not(redis_client: redis.Redis) -> None:
    """A batch retried after an outage runs the scripts again: the same event id stays the first."""
    join = FeedbackJoin(redis_client, join_ttl_s=600, park_s=10)
    join.trace_arrived("acme", "tr", "t1", JoinInfo("production", "v1", "billing"))
    payload = {"kind": "edit"}
    first = join.joined_from(join.queue_feedback(redis_client, "acme", "tr", "ev1", payload))
    retried = join.joined_from(join.queue_feedback(redis_client, "acme", "tr", "ev1", payload))
    other = join.joined_from(join.queue_feedback(redis_client, "acme", "tr", "ev2", payload))
    copy = join.joined_from(join.queue_feedback(redis_client, "acme", "tr", "ev3", {"kind": "copy"}))
    assert first is not None and retried is not None and other is not None and copy is not None
    assert (first.first_of_kind, first.first_of_any) == (True, True)
    assert (retried.first_of_kind, retried.first_of_any) == (True, True)
    assert (other.first_of_kind, other.first_of_any) == (False, False)
    assert (copy.first_of_kind, copy.first_of_any) == (True, False)
    assert redis_client.ttl("ragmon:join:firsts:acme:tr") > 0


def test_cited_answers_and_traffic_by_release(setup: tuple[MetricsProcessor, CollectorRegistry]) -> None:
    proc, reg = setup
    proc.process(
        [
            as_event(stored("trace", trace_body(1, answer={"text": "", "refused": True}))),
            as_event(stored("trace", trace_body(2, answer={"text": "x", "citations": []}))),
            as_event(stored("trace", trace_body(3))),
            as_event(stored("trace", trace_body(4, release="v2"))),
            as_event(stored("trace", trace_body(5, release=None))),
        ]
    )
    tv = {"tenant": "acme", "variant": "production"}
    assert val(reg, "ragmon_rag_cited_answers_total", **tv, intent="billing") == 3
    assert val(reg, "ragmon_rag_release_queries_total", **tv, release="v1") == 3
    assert val(reg, "ragmon_rag_release_queries_total", **tv, release="v2") == 1
    assert val(reg, "ragmon_rag_release_queries_total", **tv, release="none") == 1
