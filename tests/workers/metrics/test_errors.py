"""Errored traces in the metrics worker (real Redis): an error of its stage and type, its tokens and spend,
and nothing else (no query, latency, cost per query, refusal or feedback rate moves); finish reasons."""

from __future__ import annotations

import pytest
import redis
from prometheus_client import CollectorRegistry

from tests.support.kafka import stored, trace_body
from tests.workers.metrics.test_processor import as_event, feedback, val
from workers.metrics.config import MetricsConfig, ModelPrice
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.metrics.processor import MetricsProcessor

TV = {"tenant": "acme", "variant": "production"}


@pytest.fixture
def setup(redis_client: redis.Redis) -> tuple[MetricsProcessor, CollectorRegistry]:
    registry = CollectorRegistry()
    config = MetricsConfig(park_s=60, prices={"gpt-x": ModelPrice(prompt=1.0, completion=2.0)})
    return MetricsProcessor(config, MetricsWorkerMetrics(registry), redis_client), registry


def _errored(i: int, **error: object) -> dict:  # type: ignore[type-arg]
    return stored(
        "trace",
        trace_body(
            i,
            answer={"text": ""},
            error={"type": "provider_error", **error},
            timings={"retrieval": 20.0, "generation": 30000.0, "total": 30050.0},
            usage={"model": "gpt-x", "tokens": {"prompt": 1000}},
        ),
    )


def test_an_errored_trace_counts_as_an_error_only(setup: tuple[MetricsProcessor, CollectorRegistry]) -> None:
    proc, reg = setup
    proc.process([as_event(_errored(1)), as_event(_errored(2, type="timeout", stage="retrieval"))])
    assert (
        val(reg, "ragmon_rag_errors_total", **TV, intent="billing", stage="generation", type="provider_error")
        == 1
    )
    assert val(reg, "ragmon_rag_errors_total", **TV, intent="billing", stage="retrieval", type="timeout") == 1
    # out of every quality and latency signal and their denominators
    assert val(reg, "ragmon_rag_queries_total", **TV, intent="billing") == 0
    assert val(reg, "ragmon_rag_uncited_answers_total", **TV, intent="billing") == 0
    assert val(reg, "ragmon_rag_stage_duration_seconds_count", **TV, stage="generation") == 0
    assert val(reg, "ragmon_rag_cost_queries_total", **TV, source="estimated") == 0
    assert val(reg, "ragmon_rag_release_queries_total", **TV, release="v1") == 0
    # the money was spent: tokens and estimated spend count
    assert val(reg, "ragmon_rag_tokens_total", **TV, kind="prompt", model="gpt-x") == 2000
    assert val(reg, "ragmon_rag_cost_estimated_usd_total", **TV, source="estimated") == pytest.approx(0.002)


def test_an_unknown_error_stage_is_capped(setup: tuple[MetricsProcessor, CollectorRegistry]) -> None:
    proc, reg = setup
    proc.process([as_event(_errored(3, stage="my_custom_guard_step"))])
    assert (
        val(reg, "ragmon_rag_errors_total", **TV, intent="billing", stage="other", type="provider_error") == 1
    )


def test_feedback_on_an_errored_trace_stays_out_of_the_quality_rates(
    setup: tuple[MetricsProcessor, CollectorRegistry],
) -> None:
    proc, reg = setup
    proc.process(
        [as_event(feedback("trace-4", kind="regenerate", value=None, reason=None))]
    )  # before its trace
    proc.process([as_event(_errored(4))])
    proc.process([as_event(feedback("trace-4", kind="thumbs", value=-1))])  # after it
    assert val(reg, "ragmon_feedback_on_errored_traces_total", **TV, kind="regenerate") == 1
    assert val(reg, "ragmon_feedback_on_errored_traces_total", **TV, kind="thumbs") == 1
    joined = {**TV, "release": "v1", "intent": "billing"}
    assert val(reg, "ragmon_feedback_total", **joined, kind="regenerate", reason="none") == 0
    assert val(reg, "ragmon_feedback_thumbs_total", **joined, direction="down") == 0
    assert val(reg, "ragmon_feedback_traces_total", **joined, kind="any") == 0


def test_finish_reasons_are_counted_per_intent(setup: tuple[MetricsProcessor, CollectorRegistry]) -> None:
    proc, reg = setup
    proc.process(
        [
            as_event(stored("trace", trace_body(5, answer={"text": "a", "finish_reason": "length"}))),
            as_event(stored("trace", trace_body(6, answer={"text": "b", "finish_reason": "stop"}))),
            as_event(stored("trace", trace_body(7, answer={"text": "c"}))),  # none given: not counted
        ]
    )
    tvi = {**TV, "intent": "billing"}
    assert val(reg, "ragmon_rag_finish_reasons_total", **tvi, reason="length") == 1
    assert val(reg, "ragmon_rag_finish_reasons_total", **tvi, reason="stop") == 1
    assert val(reg, "ragmon_rag_queries_total", **tvi) == 3


def test_the_answer_checks_are_counted_per_check_and_outcome(
    setup: tuple[MetricsProcessor, CollectorRegistry],
) -> None:
    proc, reg = setup
    good = trace_body(8, answer={"text": "Refunds take 30 days.", "citations": ["d8"]})
    good["retrieval"] = {"documents": [{"id": "d8", "text": "Refunds are paid within 30 days."}]}
    phantom = trace_body(9, answer={"text": "See the policy.", "citations": ["d404"]})
    proc.process(
        [as_event(stored("trace", good)), as_event(stored("trace", phantom)), as_event(_errored(10))]
    )
    tvi = {**TV, "intent": "billing"}

    def n(check: str, outcome: str) -> float:
        return val(reg, "ragmon_rag_check_results_total", **tvi, check=check, outcome=outcome)

    assert n("citations_known", "pass") == 1 and n("citations_known", "fail") == 1
    assert n("figures_grounded", "pass") == 1 and n("figures_grounded", "skip") == 1
    assert n("json_valid", "skip") == 2 and n("forbidden_patterns", "skip") == 2
    # a failed request has no answer to check
    assert sum(n("answer_length", o) for o in ("pass", "fail", "skip")) == 2


def test_an_encoder_mismatch_is_counted_and_its_series_exists_from_the_first_trace(
    setup: tuple[MetricsProcessor, CollectorRegistry],
) -> None:
    proc, reg = setup
    same = trace_body(11, query={"text": "q", "embedding": [0.1, 0.2], "embedding_model": "emb-v1"})
    same["retrieval"] = {"documents": [], "index_embedding_model": "emb-v1"}
    proc.process([as_event(stored("trace", same))])
    assert (
        reg.get_sample_value("ragmon_rag_encoder_mismatch_total", TV) == 0
    )  # at 0: the alert sees the first
    other = trace_body(12, query={"text": "q", "embedding": [0.1, 0.2], "embedding_model": "emb-v2"})
    other["retrieval"] = {"documents": [], "index_embedding_model": "emb-v1"}
    unknown = trace_body(13, query={"text": "q"})  # no query model: nothing to compare
    proc.process([as_event(stored("trace", other)), as_event(stored("trace", unknown))])
    assert val(reg, "ragmon_rag_encoder_mismatch_total", **TV) == 1
