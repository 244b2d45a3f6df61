"""Events for review-sampler tests: traces, feedback and score events as the runtime hands them over."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime
from typing import Any

from service.contracts import StoredEvent
from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent, ModelRef
from tests.support.decoded import decoded_event
from tests.support.kafka import stored, trace_body
from workers.review.views import VIEWS
from workers.runtime.types import Event, SourceRecord

_offsets = itertools.count()


def source(topic: str = "t.traces", partition: int = 0, offset: int | None = None) -> SourceRecord:
    return SourceRecord(topic, partition, next(_offsets) if offset is None else offset, None, 0)


def _decoded(record: dict[str, Any], topic: str, offset: int | None) -> Event:
    """The record decoded by the runtime's decoder into the sampler's views, as in production."""
    at = next(_offsets) if offset is None else offset
    return decoded_event(record, VIEWS, topic=topic, offset=at)


def trace_event(i: int, tenant: str = "acme", offset: int | None = None, **overrides: Any) -> Event:
    return _decoded(stored("trace", trace_body(i, **overrides), tenant=tenant), "t.traces", offset)


def feedback_event(
    i: int, kind: str = "thumbs", value: Any = False, tenant: str = "acme", offset: int | None = None
) -> Event:
    return _decoded(
        stored("feedback", {"trace_id": f"trace-{i}", "kind": kind, "value": value}, tenant=tenant),
        "t.feedback",
        offset,
    )


def _score_event(body: FaithfulnessScoreEvent | ExclusionResultEvent, offset: int | None) -> Event:
    s = StoredEvent.model_construct(
        id=body.event_id,
        type="score",
        tenant=body.tenant,  # type: ignore[arg-type]
        timestamp=body.trace_timestamp,
        received_at=body.scored_at,
        body={},
    )
    return Event(source("t.scores", 0, offset), s, body)


def _scored_trace(i: int, tenant: str, variant: str) -> dict[str, Any]:
    """The fields of a score event about trace `trace-i` (request `req-i`), scored just now."""
    now = datetime.now(UTC)
    return {
        "event_id": uuid.uuid4(),
        "source_event_id": uuid.uuid4(),
        "tenant": tenant,
        "trace_id": f"trace-{i}",
        "request_id": f"req-{i}",
        "variant": variant,
        "trace_timestamp": now,
        "scored_at": now,
    }


def faithfulness_event(
    i: int,
    score: float | None,
    threshold: float = 0.5,
    tenant: str = "acme",
    outcome: str = "scored",
    variant: str = "production",
    scorer_rate: float = 0.5,
    offset: int | None = None,
) -> Event:
    body = FaithfulnessScoreEvent(
        **_scored_trace(i, tenant, variant),
        outcome=outcome,
        no_claims_reason="refused" if outcome == "no_claims" else None,
        mode="answer",
        score=score,
        threshold=threshold,
        below_threshold=None if score is None else score < threshold,
        model=ModelRef(source="/models/hhem", revision="ab" * 32),
        app_sample_rate=1.0,
        scorer_sample_rate=scorer_rate,
    )
    return _score_event(body, offset)


def exclusion_event(
    i: int, falsely_excluded: bool | None, tenant: str = "acme", offset: int | None = None
) -> Event:
    body = ExclusionResultEvent(
        **_scored_trace(i, tenant, "production"),
        gold_source="labels",
        eligible_gold=1,
        surviving_gold=0 if falsely_excluded else 1,
        falsely_excluded=falsely_excluded,
    )
    return _score_event(body, offset)
