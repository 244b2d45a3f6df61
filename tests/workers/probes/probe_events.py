"""Probe traces and release markers as the probes worker's runtime hands them over (the real decode)."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from service.contracts.stored import stored_document
from tests.support.decoded import decoded_event
from tests.support.records import FakeRecord
from workers.probes.processor import ProbesProcessor
from workers.probes.views import VIEWS
from workers.runtime.types import Event

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
_offsets = itertools.count()


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def probe_body(
    query_id: str,
    ids: list[str],
    model: str = "emb-v1",
    index: str = "idx-1",
    probe_set: str = "billing",
    variant: str = "production",
) -> dict[str, Any]:
    return {
        "trace_id": f"probe-{uuid.uuid4().hex[:8]}",
        "request_id": f"probe-{uuid.uuid4().hex[:8]}",
        "variant": variant,
        "query": {"text": f"probe {query_id}", "embedding_model": model},
        "retrieval": {
            "documents": [{"id": i, "text": "..."} for i in ids],
            "index_embedding_model": model,
            "index_version": index,
        },
        "probe": {"set": probe_set, "query_id": query_id},
    }


def probe_event(proc: ProbesProcessor, when: datetime, tenant: str = "acme", **kw: Any) -> Event:
    """Decoded by the worker's own subscription of the probes topic."""
    doc = stored_document(
        str(uuid.uuid4()), "trace", tenant, when.isoformat(), when.isoformat(), probe_body(**kw)
    )
    sub = proc.subscriptions[0]
    out = sub.decode(FakeRecord(orjson.dumps(doc), [], sub.topic, 0, next(_offsets), None, 0))
    assert isinstance(out, Event), out
    return out


def release_event(when: datetime, tenant: str = "acme", release: str = "2026.12.1", **change: str) -> Event:
    """A release marker; `change`: its component, from (as from_) and to, when it names them."""
    body: dict[str, Any] = {"release": release, "variant": "production", "description": "new embedding index"}
    body.update({("from" if k == "from_" else k): v for k, v in change.items()})
    doc = stored_document(str(uuid.uuid4()), "release", tenant, when.isoformat(), when.isoformat(), body)
    return decoded_event(doc, VIEWS, topic="t.releases", offset=next(_offsets))


def run(proc: ProbesProcessor, when: datetime, answers: dict[str, list[str]], **kw: Any) -> list[Event]:
    """One replay of the probe set: one trace per probe query."""
    return [probe_event(proc, when, query_id=q, ids=ids, **kw) for q, ids in answers.items()]
