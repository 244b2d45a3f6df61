"""Events for the shadow worker's tests, as the runtime hands them (traces and score events)."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime
from typing import Any

from service.contracts import StoredEvent
from service.contracts.scores import (
    FaithfulnessScoreEvent,
    ModelRef,
    score_event_id,
)
from tests.support.decoded import decoded_event
from workers.runtime.types import Event, SourceRecord
from workers.shadow.views import VIEWS

_offsets = itertools.count()


def trace_body(
    request_id: str,
    variant: str = "production",
    intent: str = "billing",
    total_ms: float = 800.0,
    refused: bool = False,
    cited: bool = True,
    cost: float = 0.002,
) -> dict[str, Any]:
    return {
        "trace_id": f"{variant}-{request_id}",
        "request_id": request_id,
        "variant": variant,
        "intent": intent,
        "query": {"text": "how do I pay?"},
        "retrieval": {"filters": {"relevance": [{"field": "locale", "op": "eq", "value": "pt"}]}},
        "answer": {
            "text": "" if refused else "You pay monthly.",
            "refused": refused,
            "citations": ["d1"] if cited and not refused else [],
        },
        "timings": {"retrieval": total_ms * 0.2, "generation": total_ms * 0.7, "total": total_ms},
        "usage": {"model": "m", "tokens": {"prompt": 500, "completion": 80}, "cost_usd": cost},
    }


def trace_event(body: dict[str, Any], tenant: str = "acme", event_id: uuid.UUID | None = None) -> Event:
    """The trace as the runtime hands it to the shadow worker: the stored record decoded into its view."""
    now = datetime.now(UTC)
    stored = StoredEvent.model_validate(
        {
            "id": event_id or uuid.uuid4(),
            "type": "trace",
            "tenant": tenant,
            "timestamp": now,
            "received_at": now,
            "body": body,
        }
    )
    return decoded_event(stored, VIEWS, topic="test.traces", offset=next(_offsets))


def score_body(
    request_id: str, variant: str, score: float, tenant: str = "acme", threshold: float = 0.5
) -> FaithfulnessScoreEvent:
    """The answer-mode faithfulness score of `variant`'s trace for `request_id`; its ids derive from
    (tenant, variant, request_id), so sending it again is a duplicate."""
    source_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{tenant}/{variant}/{request_id}")
    now = datetime.now(UTC)
    return FaithfulnessScoreEvent(
        event_id=score_event_id(source_id, "answer", "rev"),
        source_event_id=source_id,
        tenant=tenant,
        trace_id=f"{variant}-{request_id}",
        request_id=request_id,
        variant=variant,
        trace_timestamp=now,
        scored_at=now,
        outcome="scored",
        mode="answer",
        score=score,
        threshold=threshold,
        below_threshold=score < threshold,
        model=ModelRef(source="hhem", revision="rev"),
        app_sample_rate=1.0,
        scorer_sample_rate=1.0,
    )


def score_event(
    request_id: str, variant: str, score: float, tenant: str = "acme", threshold: float = 0.5
) -> Event:
    body = score_body(request_id, variant, score, tenant, threshold)
    envelope: dict[str, Any] = {
        "id": body.event_id,
        "type": "score",
        "tenant": tenant,
        "timestamp": body.scored_at,
        "received_at": body.scored_at,
        "body": {},
    }
    stored = StoredEvent.model_construct(**envelope)
    return Event(source=SourceRecord("test.scores", 0, next(_offsets), None, 0), stored=stored, body=body)
