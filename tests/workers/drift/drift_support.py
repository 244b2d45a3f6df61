"""Helpers of the drift worker's tests: trace events, small configs, topic queries."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

from service.contracts import StoredEvent
from tests.support.decoded import decoded_event
from workers.drift.config import DriftConfig
from workers.drift.encoder import EncoderSlot, PinnedEncoder
from workers.drift.processor import DriftProcessor
from workers.drift.views import VIEWS
from workers.runtime.types import Event, SourceRecord

DATA = Path(__file__).parent / "data"
TOPICS = ("billing", "cooking", "devops")
T0 = 1_700_000_000.0
_offsets = itertools.count()


def topic_queries(topic: str) -> list[str]:
    return [q for q in (DATA / f"queries_{topic}.txt").read_text().splitlines() if q.strip()]


def make_event(
    text: str = "how do I reset my password?",
    *,
    received_at: float = T0,
    tenant: str = "acme",
    embedding: list[float] | np.ndarray | None = None,
    model: str | None = None,
    intent: str | None = None,
    event_id: str | None = None,
    event_type: str = "trace",
    body: dict[str, object] | None = None,
) -> Event:
    """A decoded record as the runtime hands it to a processor."""
    when = datetime.fromtimestamp(received_at, tz=UTC)
    query: dict[str, object] = {"text": text}
    if embedding is not None:
        query["embedding"] = [float(x) for x in embedding]
        query["embedding_model"] = model
    raw = body if body is not None else {"trace_id": "t1", "request_id": "r1", "query": query}
    if intent is not None:
        raw["intent"] = intent
    stored = StoredEvent(
        id=uuid.UUID(event_id) if event_id else uuid.uuid4(),
        type=event_type,
        tenant=tenant,
        timestamp=when,
        received_at=when,
        body=raw,
    )
    offset, timestamp_ms = next(_offsets), int(received_at * 1000)
    if body is None and event_type == "trace":
        return decoded_event(stored, VIEWS, topic="ragmon.traces", offset=offset, timestamp_ms=timestamp_ms)
    # Another type on the traces topic, as a processor would see it without the runtime's type check.
    source = SourceRecord("ragmon.traces", 0, offset, None, timestamp_ms)
    return Event(source=source, stored=stored, body=raw)


def app_config(**overrides: object) -> DriftConfig:
    """Small windows on the app's own embeddings, no encoder: fast and deterministic."""
    base: dict[str, object] = {
        "encoder": {"enabled": False},
        "app_embeddings": {"models": ["emb-a", "emb-b"]},
        "reference_size": 20,
        "current_size": 20,
        "min_current_size": 10,
        "test_every_queries": 10,
        "test_every_seconds": 30.0,
        "alpha": 0.05,
        "permutations": 199,
        "seed": 7,
        "publish_every_s": 1.0,
    }
    base.update(overrides)
    return DriftConfig.model_validate(base)


def build_processor(
    config: DriftConfig,
    redis_client: object,
    registry: CollectorRegistry,
    encoder: PinnedEncoder | None = None,
) -> DriftProcessor:
    slot = None
    if encoder is not None:
        slot = EncoderSlot(encoder.batch_size, "cpu")
        slot.encoder = encoder
    return DriftProcessor(config, redis_client, registry, encoder=slot)  # type: ignore[arg-type]


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)
