"""Score events: what scoring workers write to the scores topic (Topics.scores).

Consumers (the shadow worker, the Phoenix exporter, the review sampler) read
them from there; they are part of the contract so no worker imports another.
Every score event is keyed like its trace (tenant, request id), so production
and candidate twins share a partition, and carries `type` to tell kinds apart.

Faithfulness: one event per sampled trace with an outcome: `scored` (with its score) or
`no_claims` (a refusal or empty answer: no score, by design). The shadow
worker pairs production and candidate events by (tenant, request_id) — the
record key, so twins share a partition — and Phoenix annotations can use the
trace id. `event_id` is derived from the source trace event, the mode and the
model revision, so a redelivered trace produces the same id and consumers can
deduplicate.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.contracts.topics import H_EVENT_ID, H_EVENT_TYPE, H_SCHEMA, H_TENANT, record_key

SCORE_EVENT_TYPE = "faithfulness_score"
EXCLUSION_EVENT_TYPE = "exclusion_result"
SIGNAL_EVENT_TYPE = "implicit_signal"
# Fixed namespace for uuid5 ids of score events (any constant would do; it must never change).
SCORE_EVENT_NAMESPACE = uuid.UUID("5b0c7a52-3c1e-4f43-9a56-6b8a0f0e7c21")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UnsupportedSentence(_Strict):
    index: int = Field(ge=0, description="position among the answer's sentences")
    text: str
    score: float = Field(ge=0.0, le=1.0)


class TruncationRecord(_Strict):
    documents_total: int = Field(ge=0)
    documents_kept: int = Field(ge=0)
    tokens_total: int = Field(ge=0)
    tokens_kept: int = Field(ge=0)
    truncated_tokens: int = Field(ge=0)
    partial_document: bool


class ModelRef(_Strict):
    source: str = Field(description="directory or hub id the model was loaded from")
    revision: str = Field(description="sha256 of the weight files")


class _TraceScore(_Strict):
    """What every score event says about the trace it scored (keyed, paired and deduplicated by these)."""

    schema_version: Literal[1] = 1
    event_id: uuid.UUID
    source_event_id: uuid.UUID
    tenant: str
    trace_id: str
    request_id: str
    variant: str
    release: str | None = None
    intent: str | None = None
    trace_timestamp: datetime
    scored_at: datetime


class FaithfulnessScoreEvent(_TraceScore):
    type: Literal["faithfulness_score"] = "faithfulness_score"
    outcome: Literal["scored", "no_claims"]
    no_claims_reason: Literal["refused", "empty"] | None = None
    mode: Literal["answer", "sentences"]
    score: float | None = Field(
        None, ge=0.0, le=1.0, description="answer: P(consistent); sentences: supported-sentence fraction"
    )
    threshold: float = Field(ge=0.0, le=1.0)
    below_threshold: bool | None = None
    sentences_total: int | None = Field(None, ge=0)
    sentences_supported: int | None = Field(None, ge=0)
    unsupported_sentences: list[UnsupportedSentence] = Field(default_factory=list)
    truncation: TruncationRecord | None = None
    model: ModelRef
    app_sample_rate: float = Field(gt=0.0, le=1.0, description="how the app sampled the trace")
    scorer_sample_rate: float = Field(ge=0.0, le=1.0, description="share of request ids this worker scores")


def score_event_id(source_event_id: uuid.UUID, mode: str, revision: str) -> uuid.UUID:
    return uuid.uuid5(SCORE_EVENT_NAMESPACE, f"{source_event_id}/{mode}/{revision}")


def encode_record(event: FaithfulnessScoreEvent) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) for the scores topic; keyed like traces, by tenant and request id."""
    return score_record(event)


class ExcludedGold(_Strict):
    """One eligible gold document that no relevance predicate let through."""

    doc_id: str
    predicates: list[str] = Field(
        description="'field op' of each relevance predicate it fails (never values)"
    )


class ExclusionResultEvent(_TraceScore):
    """The exclusion worker's verdict on one trace's exclusion sample.

    `falsely_excluded` is None when the query has no eligible gold (missing
    evidence, not a pass).
    """

    type: Literal["exclusion_result"] = "exclusion_result"
    gold_source: Literal["labels", "proxy"]
    eligible_gold: int = Field(ge=0)
    surviving_gold: int = Field(ge=0)
    falsely_excluded: bool | None
    excluded_gold: list[ExcludedGold] = Field(default_factory=list, max_length=100)
    leaked: int = Field(
        0, ge=0, description="candidates or context documents violating an entitlement predicate"
    )


def exclusion_event_id(source_event_id: uuid.UUID, gold_source: str) -> uuid.UUID:
    return uuid.uuid5(SCORE_EVENT_NAMESPACE, f"{source_event_id}/exclusion/{gold_source}")


def score_record(
    event: FaithfulnessScoreEvent | ExclusionResultEvent | ImplicitSignalEvent,
) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) for the scores topic, for any score event kind: keyed like its trace, by
    request id; a signal, which knows only the trace id, like feedback."""
    if isinstance(event, ImplicitSignalEvent):
        key = record_key("feedback", event.tenant, {"trace_id": event.trace_id})
    else:
        key = record_key("trace", event.tenant, {"request_id": event.request_id})
    headers = [
        (H_EVENT_ID, str(event.event_id).encode()),
        (H_EVENT_TYPE, event.type.encode()),
        (H_TENANT, event.tenant.encode()),
        (H_SCHEMA, str(event.schema_version).encode()),
    ]
    return key, event.model_dump_json().encode(), headers


class ImplicitSignalEvent(_Strict):
    """An implicit user signal a worker found about a trace (today: the drift worker's reformulations,
    docs/reformulations.md), for the review store's signals against blind review (docs/review.md).

    Not a score: the Phoenix exporter and the shadow worker skip it. `trace_timestamp` is the time of
    the event that gave the signal (the follow-up query), so the envelope the runtime builds is ordinary.
    """

    schema_version: Literal[1] = 1
    type: Literal["implicit_signal"] = "implicit_signal"
    event_id: uuid.UUID
    source_event_id: uuid.UUID = Field(description="the event that gave the signal (the follow-up trace)")
    tenant: str
    trace_id: str = Field(description="the trace the signal is about (the earlier query's)")
    signal: Literal["reformulation"]
    by_trace_id: str = Field(description="the trace that gave the signal")
    trace_timestamp: datetime
    scored_at: datetime


def signal_event_id(source_event_id: uuid.UUID, signal: str) -> uuid.UUID:
    return uuid.uuid5(SCORE_EVENT_NAMESPACE, f"{source_event_id}/signal/{signal}")
