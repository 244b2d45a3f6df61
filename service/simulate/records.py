"""Simulated events and the ground truth each one carries for the manifest.

The body is what goes on the wire; the facts are what the generator knows
about it (phase, faithfulness, false-exclusion truth ...) and never leave
this process except aggregated into the manifest.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from service.simulate.retrieval import ExclusionTruth


def event_id(bits: int) -> str:
    """A uuid4 drawn from the seeded RNG (a resend must reuse it: it is the idempotency key)."""
    return str(uuid.UUID(int=bits, version=4))


def rfc3339(anchor: datetime, offset_s: float) -> str:
    return (anchor + timedelta(seconds=offset_s)).isoformat(timespec="milliseconds")


@dataclass(slots=True, eq=False)
class TraceFacts:
    event_id: str
    trace_id: str
    request_id: str
    tenant: str
    variant: str
    release: str
    intent: str
    phase: str
    at_s: float
    sample_rate: float
    model: str
    tokens: dict[str, int]
    cost_usd: float | None
    timings: dict[str, float]
    refused: bool
    faithful: bool | None
    gold_in_context: bool
    off_topic: bool
    leak: bool
    cited: bool
    exclusion: ExclusionTruth
    sampled: bool
    gold_in_sample: bool
    embedding_model: str | None
    embedding_dim: int | None
    error: tuple[str, str] | None = None  # (stage, type) of a failed request: no answer, no feedback
    finish_reason: str | None = None
    labelled_gold: bool = False
    emitted: bool = False  # set when the stream hands the trace out: "feedback before trace" is exact


@dataclass(slots=True, eq=False)
class FeedbackFacts:
    event_id: str
    trace: TraceFacts
    kind: str
    reason: str | None
    at_s: float
    late: bool
    before_trace: bool = False


@dataclass(slots=True, eq=False)
class LabelFacts:
    event_id: str
    trace: TraceFacts
    at_s: float
    has_gold: bool
    faithful: bool | None
    answerable: bool


@dataclass(slots=True, eq=False)
class ReleaseFacts:
    event_id: str
    tenant: str
    release: str
    variant: str
    at_s: float


@dataclass(slots=True, eq=False)
class ProbeFacts:
    """A replayed probe query (service/simulate/probes.py): never a production trace in the manifest."""

    event_id: str
    tenant: str
    probe_set: str
    query_id: str
    embedding_model: str
    index_version: str
    at_s: float
    retrieved_ids: list[str]


Facts = TraceFacts | FeedbackFacts | LabelFacts | ReleaseFacts | ProbeFacts


@dataclass(slots=True, eq=False)
class SimEvent:
    emit_s: float  # when the app sends it, in scenario seconds
    at_s: float  # its timestamp, in scenario seconds
    tenant: str  # travels as the API key, never in the body
    type: str
    id: str
    body: dict[str, Any]
    facts: Facts = field(repr=False)

    def envelope(self, anchor: datetime) -> dict[str, Any]:
        return {"type": self.type, "id": self.id, "timestamp": rfc3339(anchor, self.at_s), "body": self.body}

    def line(self, anchor: datetime) -> dict[str, Any]:
        """One JSON-lines record of `ragmon simulate generate`."""
        return {"tenant": self.tenant, "emit_s": round(self.emit_s, 6), "event": self.envelope(anchor)}
