"""User feedback sent the OpenInference/Phoenix way -> native feedback events (pure).

A span carries `annotations.N.annotation.{name,label,score,explanation,identifier}`
and targets the annotated trace by a span link (no link: its own trace). Only
annotations whose name is a feedback kind (or `user_feedback`/`feedback`, read as
`thumbs`) become feedback events; others (an LLM judge's `correctness`) are counted
and skipped. The rules are in docs/otlp.md.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from service.contracts import FEEDBACK_KINDS, FEEDBACK_REASONS, FeedbackBody
from service.contracts.fast import check_body
from workers.assembler.documents import identifier
from workers.assembler.view import SpanView

FEEDBACK_NAMESPACE = uuid.UUID("2c9d51e0-6a7b-5e42-8f13-94b0c7d2a6e8")
THUMBS_ALIASES = {"user_feedback", "feedback", "thumbs", "thumbs_up_down"}
POSITIVE_LABELS = {"up", "thumbs_up", "positive", "good", "helpful", "correct", "true", "yes"}
NEGATIVE_LABELS = {"down", "thumbs_down", "negative", "bad", "unhelpful", "incorrect", "wrong", "false", "no"}


@dataclass(frozen=True)
class FeedbackEvent:
    id: str
    timestamp: datetime
    body: dict[str, Any]


def has_annotations(span: SpanView) -> bool:
    return any(k.startswith("annotations.") for k in span.attrs)


def _kind(name: Any) -> str | None:
    if not isinstance(name, str):
        return None
    name = name.strip().lower()
    if name in THUMBS_ALIASES:
        return "thumbs"
    return name if name in FEEDBACK_KINDS else None


def _thumbs_value(label: Any, score: Any) -> bool | None:
    if isinstance(label, str) and label.strip().lower() in POSITIVE_LABELS | NEGATIVE_LABELS:
        return label.strip().lower() in POSITIVE_LABELS
    if isinstance(score, int | float) and not isinstance(score, bool):
        return score > 0
    return None


def _body(target: str, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    label, score = fields.get("annotation.label"), fields.get("annotation.score")
    body: dict[str, Any] = {"trace_id": target, "kind": kind}
    body["value"] = _thumbs_value(label, score) if kind == "thumbs" else score
    for candidate in (fields.get("annotation.reason"), label, fields.get("annotation.explanation")):
        if isinstance(candidate, str) and candidate.strip().lower() in FEEDBACK_REASONS:
            body["reason"] = candidate.strip().lower()
            break
    document = identifier(fields.get("annotation.document_id"))
    if document:
        body["document_id"] = document
    return body


def feedback_events(tenant: str, trace_id: str, span: SpanView) -> tuple[list[FeedbackEvent], dict[str, int]]:
    """(feedback events, skipped annotations by reason: not_feedback, invalid)."""
    target = span.links[0][0] if span.links else trace_id
    at = datetime.fromtimestamp((span.end_ns or span.start_ns) / 1e9, UTC)
    events: list[FeedbackEvent] = []
    skipped: dict[str, int] = {}
    for index, fields in span.indexed("annotations").items():
        kind = _kind(fields.get("annotation.name"))
        if kind is None:
            skipped["not_feedback"] = skipped.get("not_feedback", 0) + 1
            continue
        body = _body(target, kind, fields)
        if not check_body(
            "feedback", body
        ):  # msgspec first (never looser); the model decides what it refuses
            try:
                FeedbackBody.model_validate(body)
            except ValidationError:
                skipped["invalid"] = skipped.get("invalid", 0) + 1
                continue
        event_id = str(uuid.uuid5(FEEDBACK_NAMESPACE, f"{tenant}/{trace_id}/{span.span_id}/{index}"))
        events.append(FeedbackEvent(event_id, at, body))
    return events, skipped
