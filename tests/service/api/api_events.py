"""Builders of valid wire-contract events and the test API keys (shared by the API tests)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

ACME_KEY = "rgm_test_acme_0123456789"
GLOBEX_KEY = "rgm_test_globex_0123456789"
READONLY_KEY = "rgm_test_acme_readonly_0123456789"


def now_iso(offset_s: float = 0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=offset_s)).isoformat()


def event(etype: str, body: dict[str, Any], **envelope: Any) -> dict[str, Any]:
    out = {"type": etype, "id": str(uuid.uuid4()), "timestamp": now_iso(), "body": body}
    out.update(envelope)
    return out


def trace_body(**overrides: Any) -> dict[str, Any]:
    request_id = f"req-{uuid.uuid4().hex[:12]}"
    body: dict[str, Any] = {
        "trace_id": f"tr-{uuid.uuid4().hex[:12]}",
        "request_id": request_id,
        "variant": "production",
        "release": "2026.01.3",
        "sample_rate": 0.25,
        "intent": "billing",
        "query": {"text": "How do I change the billing address on my invoice?"},
        "retrieval": {
            "documents": [
                {
                    "id": "kb-101",
                    "text": "Billing addresses are edited under Settings > Billing.",
                    "score": 0.83,
                    "metadata": {"locale": "en-US", "product": "invoices"},
                },
                {
                    "id": "kb-207",
                    "text": "Invoices show the address valid on the invoice date.",
                    "score": 0.71,
                },
            ],
            "filters": {
                "entitlement": [{"field": "tenant", "op": "eq", "value": "acme"}],
                "relevance": [{"field": "locale", "op": "in", "value": ["en-US", "en-GB"]}],
            },
        },
        "answer": {"text": "Open Settings > Billing and edit the address.", "citations": ["kb-101"]},
        "timings": {"retrieval": 41.5, "rerank": 12.0, "generation": 820.0, "total": 880.0},
        "usage": {"model": "gpt-4o-mini", "tokens": {"prompt": 812, "completion": 64}, "cost_usd": 0.0004},
    }
    body.update(overrides)
    return body


def trace_event(**body_overrides: Any) -> dict[str, Any]:
    return event("trace", trace_body(**body_overrides))


def feedback_event(trace_id: str = "tr-1", **overrides: Any) -> dict[str, Any]:
    return event(
        "feedback", {"trace_id": trace_id, "kind": "thumbs", "value": False, "reason": "wrong", **overrides}
    )


def release_event(**overrides: Any) -> dict[str, Any]:
    return event(
        "release",
        {"release": "2026.01.4", "variant": "production", "description": "new reranker", **overrides},
    )


def label_event(trace_id: str = "tr-1", **overrides: Any) -> dict[str, Any]:
    return event(
        "label",
        {"trace_id": trace_id, "gold_ids": ["kb-101"], "faithful": True, "reviewer": "acme-app", **overrides},
    )


def headers_of(record: Any) -> dict[str, bytes]:
    return dict(record.headers)
