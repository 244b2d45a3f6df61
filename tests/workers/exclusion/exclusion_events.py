"""Builders for the exclusion worker's processor tests: events as the runtime hands them."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime
from typing import Any

from tests.support.decoded import decoded_event
from workers.exclusion.views import VIEWS
from workers.runtime.types import Event

_offsets = itertools.count()
ACME = {"field": "tenant", "op": "eq", "value": "acme"}
EN_US = {"field": "locale", "op": "eq", "value": "en-US"}


def make_event(event_type: str, body: dict[str, Any], tenant: str = "acme") -> Event:
    """An event as the runtime hands it: the stored record decoded into the worker's view."""
    now = datetime.now(UTC)
    envelope = {
        "id": uuid.uuid4(),
        "type": event_type,
        "tenant": tenant,
        "timestamp": now,
        "received_at": now,
    }
    return decoded_event(
        {**envelope, "body": body}, VIEWS, topic=f"test.{event_type}s", offset=next(_offsets)
    )


def candidate(doc_id: str, locale: str, score: float = 0.5, tenant: str = "acme") -> dict[str, Any]:
    return {"id": doc_id, "score": score, "metadata": {"tenant": tenant, "locale": locale}}


def trace_body(
    trace_id: str,
    candidates: list[dict[str, Any]] | None = None,
    gold_ids: list[str] | None = None,
    relevance: list[dict[str, Any]] | None = None,
    documents: list[dict[str, Any]] | None = None,
    variant: str = "production",
    intent: str | None = "billing",
) -> dict[str, Any]:
    retrieval: dict[str, Any] = {
        "documents": documents or [],
        "filters": {"entitlement": [ACME], "relevance": [EN_US] if relevance is None else relevance},
    }
    if candidates is not None:
        retrieval["exclusion_sample"] = {"candidates": candidates, "gold_ids": gold_ids}
    return {
        "trace_id": trace_id,
        "request_id": f"req-{trace_id}",
        "variant": variant,
        "intent": intent,
        "query": {"text": "how do I pay?"},
        "retrieval": retrieval,
    }


def trace(trace_id: str, **kwargs: Any) -> Event:
    tenant = kwargs.pop("tenant", "acme")
    return make_event("trace", trace_body(trace_id, **kwargs), tenant=tenant)


def label(trace_id: str, gold_ids: list[str] | None, tenant: str = "acme") -> Event:
    body: dict[str, Any] = {"trace_id": trace_id, "gold_ids": gold_ids}
    if gold_ids is None:
        body["faithful"] = True
    return make_event("label", body, tenant=tenant)
