"""Trace events as the runtime hands them to the processor, and an emitter that keeps what it gets."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from service.contracts import StoredEvent
from service.contracts.views import record_decoder
from workers.faithfulness.views import FaithfulnessTrace
from workers.runtime.types import Event, SourceRecord

_DECODE = record_decoder(FaithfulnessTrace)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def trace(
    trace_id: str,
    answer: str,
    documents: list[str],
    *,
    request_id: str | None = None,
    variant: str = "production",
    tenant: str = "acme",
    refused: bool = False,
    offset: int = 0,
    **extra: Any,
) -> Event:
    body: dict[str, Any] = {
        "trace_id": trace_id,
        "request_id": request_id or f"req-{trace_id}",
        "variant": variant,
        "query": {"text": "what does the policy say?"},
        "retrieval": {"documents": [{"id": f"d{i}", "text": text} for i, text in enumerate(documents)]},
        "answer": {"text": answer, "refused": refused},
        **extra,
    }
    stored = StoredEvent(
        id=uuid.uuid5(uuid.NAMESPACE_URL, f"{tenant}/{trace_id}"),
        type="trace",
        tenant=tenant,
        timestamp=NOW,
        received_at=NOW,
        body=body,
    )
    source = SourceRecord("ragmon.traces", 0, offset, f"{tenant}/{body['request_id']}".encode(), 0)
    # The body as the runtime hands it over: the record decoded once into the worker's view.
    return Event(source=source, stored=stored, body=_DECODE.decode(stored.model_dump_json()).body)


@dataclass
class Emitted:
    topic: str
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclass
class CollectingEmitter:
    records: list[Emitted] = field(default_factory=list)

    def emit(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None:
        self.records.append(Emitted(topic, key, value, list(headers or [])))

    def wait(self, timeout_s: float = 15.0) -> None:
        """Nothing to wait for: records are kept in memory as they are emitted."""
