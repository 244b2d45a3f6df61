"""Workers' decode views agree with the contract models: same values on valid records, and a
record that breaks a rule on a field a view reads is rejected by both."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import orjson
import pytest
from pydantic import ValidationError

from service.contracts import BODY_MODELS, StoredEvent
from service.contracts.stored import stored_document
from service.contracts.views import View, record_decoder
from service.simulate.scenario import load_scenario
from service.simulate.stream import generate_events
from tests.support.kafka import stored, trace_body
from workers.drift.views import VIEWS as DRIFT
from workers.exclusion.views import VIEWS as EXCLUSION
from workers.faithfulness.views import VIEWS as FAITHFULNESS
from workers.metrics.views import VIEWS as METRICS
from workers.review.views import VIEWS as REVIEW
from workers.shadow.views import VIEWS as SHADOW

WORKER_VIEWS: dict[str, dict[str, type[View]]] = {
    "metrics": METRICS,
    "exclusion": EXCLUSION,
    "drift": DRIFT,
    "shadow": SHADOW,
    "review": REVIEW,
    "faithfulness": FAITHFULNESS,
}


def _project(full: Any, seen: Any) -> Any:
    """The part of `full` (the contract model, as JSON) that a view holds (`seen`, as JSON)."""
    if isinstance(seen, dict) and isinstance(full, dict) and set(seen) <= set(full):
        return {k: _project(full[k], v) for k, v in seen.items()}
    if isinstance(seen, list) and isinstance(full, list) and len(seen) == len(full):
        return [_project(f, s) for f, s in zip(full, seen, strict=True)]
    return full


def _simulated(count: int) -> list[dict[str, Any]]:
    scenario = load_scenario("incidents").with_overrides(duration_s=None)
    anchor = datetime.now(UTC) - timedelta(hours=1)
    out = []
    for ev in itertools.islice(generate_events(scenario, anchor), count):
        env = ev.envelope(anchor)
        out.append(
            stored_document(
                env["id"],
                env["type"],
                ev.tenant,
                env["timestamp"],
                datetime.now(UTC).isoformat(),
                env["body"],
            )
        )
    return out


def test_views_hold_the_contract_models_values_on_simulated_records() -> None:
    records = _simulated(3000)
    read = {
        (worker, r["type"]) for r in records for worker, views in WORKER_VIEWS.items() if r["type"] in views
    }
    assert {("exclusion", "label"), ("metrics", "feedback"), ("drift", "trace")} <= read
    rich = [
        r
        for r in records
        if r["type"] == "trace"
        and r["body"]["query"].get("embedding")
        and r["body"].get("retrieval", {}).get("exclusion_sample")
    ]
    assert rich, "the corpus must carry exclusion samples and app embeddings"
    for record in records:
        full = StoredEvent.model_validate(record)
        model = BODY_MODELS[full.type].model_validate(full.body).model_dump(mode="json")
        for views in WORKER_VIEWS.values():
            if full.type not in views:
                continue
            decoded = record_decoder(views[full.type]).decode(orjson.dumps(record))
            assert (decoded.id, decoded.tenant, decoded.received_at) == (
                full.id,
                full.tenant,
                full.received_at,
            )
            seen = msgspec.to_builtins(decoded.body)
            assert seen == _project(model, seen), (views[full.type].__name__, record["id"])


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = body
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        node[int(last) if isinstance(node, list) else last] = value

    return mutate


def _sample_body() -> dict[str, Any]:
    body = trace_body(1)
    body["query"] = {"text": "q", "embedding": [0.1, 0.2], "embedding_model": "emb-a"}
    body["retrieval"]["filters"] = {
        "entitlement": [{"field": "tenant", "op": "eq", "value": "acme"}],
        "relevance": [{"field": "day", "op": "gte", "value": "2025-01-01"}],
    }
    body["retrieval"]["exclusion_sample"] = {
        "candidates": [{"id": "c1", "score": 0.5, "metadata": {"day": "x"}}],
        "gold_ids": ["c1"],
    }
    return body


HUGE = "<a JSON number beyond the float range>"  # Python cannot hold it: written into the bytes


def _json(doc: dict[str, Any]) -> bytes:
    return orjson.dumps(doc).replace(orjson.dumps(HUGE), b"-1e400")


# (worker whose view reads the field, how the body breaks a rule)
BROKEN = [
    ("metrics", _set("trace_id", "has space")),
    ("metrics", _set("trace_id", "trace-1\n")),  # `$` would let a final newline through
    ("metrics", _set("trace_id", "x" * 129)),
    ("metrics", _set("variant", "Upper")),
    ("metrics", _set("sample_rate", 0)),
    ("metrics", _set("sample_rate", 1.5)),
    ("metrics", _set("timings", {"Bad-Stage": 1.0})),
    ("metrics", _set("timings", {"total": -1.0})),
    ("metrics", _set("timings", {"total": 3_600_001.0})),
    ("metrics", _set("usage.tokens", {"telepathy": 1})),
    ("metrics", _set("usage.tokens", {"prompt": -1})),
    ("metrics", _set("usage.cost_usd", -0.5)),
    ("metrics", _set("usage.surprise", 1)),
    ("metrics", _set("answer.citations", ["ok", "not ok"])),
    ("exclusion", _set("intent", "")),
    ("exclusion", _set("retrieval.exclusion_sample.candidates.0.metadata", {"k": "x" * 1025})),
    ("exclusion", _set("retrieval.exclusion_sample.candidates.0.metadata", {"k": {"nested": 1}})),
    ("exclusion", _set("retrieval.exclusion_sample.candidates.0.metadata", {"k": list(range(65))})),
    ("exclusion", _set("retrieval.exclusion_sample.candidates.0.metadata", {"": 1})),
    ("exclusion", _set("retrieval.exclusion_sample.candidates.0.surprise", 1)),
    ("exclusion", _set("retrieval.exclusion_sample.candidates.0.score", HUGE)),
    ("exclusion", _set("retrieval.exclusion_sample.gold_ids", ["bad id"])),
    ("exclusion", _set("retrieval.filters.relevance.0.op", "like")),
    ("exclusion", _set("retrieval.filters.relevance.0.value", "not a date")),
    ("exclusion", _set("retrieval.filters.entitlement.0", {"field": "g", "op": "in", "value": "staff"})),
    ("exclusion", _set("retrieval.filters.entitlement.0", {"field": "g", "op": "exists", "value": "yes"})),
    ("exclusion", _set("retrieval.filters.entitlement.0", {"field": "g", "op": "eq"})),
    ("exclusion", _set("retrieval.documents.0.metadata", {"k": [{"a": 1}]})),
    ("shadow", _set("request_id", "has space")),
    ("shadow", _set("request_id", "")),
    ("shadow", _set("variant", "Cand-A")),
    ("shadow", _set("answer.text", "x" * 32_769)),
    ("shadow", _set("answer.refused", "maybe")),
    ("shadow", _set("answer.citations", ["ok", "not ok"])),
    ("shadow", _set("timings", {"total": -1.0})),
    ("shadow", _set("usage.cost_usd", -0.5)),
    ("shadow", _set("retrieval.filters.relevance.0.op", "like")),
    ("shadow", _set("retrieval.filters.relevance.0", {"field": "locale", "op": "eq"})),
    ("drift", _set("query", {"text": "q", "embedding": [0.1]})),
    ("drift", _set("query", {"text": "", "embedding": [0.1], "embedding_model": "m"})),
    ("drift", _set("query.embedding", [0.1, HUGE])),
    ("drift", _set("query.embedding", [])),
    ("review", _set("request_id", "two words")),
    ("review", _set("retrieval.documents.0.id", "bad id")),
    ("review", _set("retrieval.documents.0.text", "x" * 32_769)),
    ("review", _set("retrieval.documents.0.score", HUGE)),
    ("review", _set("answer.text", "x" * 32_769)),
    ("review", _set("answer.refused", "maybe")),
    ("review", _set("query.text", "")),
    ("review", _set("retrieval.exclusion_sample.candidates.0.id", "")),
    ("faithfulness", _set("request_id", "req 1")),
    ("faithfulness", _set("request_id", None)),
    ("faithfulness", _set("answer.text", "x" * 32_769)),
    ("faithfulness", _set("answer.text", 42)),
    ("faithfulness", _set("answer.refused", "maybe")),
    ("faithfulness", _set("retrieval.documents.0.text", "x" * 32_769)),
    ("faithfulness", _set("retrieval.documents.0.text", None)),
    ("faithfulness", _set("retrieval.documents.0", {"id": "d1"})),
    ("faithfulness", _set("retrieval.documents", [{"id": f"d{i}", "text": "t"} for i in range(101)])),
    ("faithfulness", _set("sample_rate", 0)),
    ("faithfulness", _set("release", "bad release")),
]


@pytest.mark.parametrize(("worker", "mutate"), BROKEN)
def test_a_rule_broken_on_a_read_field_is_rejected_by_model_and_view(worker: str, mutate: Any) -> None:
    body = _sample_body()
    decoder = record_decoder(WORKER_VIEWS[worker]["trace"])
    decoder.decode(orjson.dumps(stored("trace", body)))  # the unbroken body fits both
    BODY_MODELS["trace"].model_validate(body)
    broken = copy.deepcopy(body)
    mutate(broken)
    with pytest.raises(ValidationError):
        BODY_MODELS["trace"].model_validate_json(_json(broken))
    with pytest.raises(msgspec.ValidationError):
        decoder.decode(_json(stored("trace", broken)))


@pytest.mark.parametrize(
    ("envelope", "value"),
    [("id", "not-a-uuid"), ("tenant", "Acme"), ("received_at", None), ("schema_version", 2), ("extra", 1)],
)
def test_the_envelope_keeps_its_rules_in_every_view(envelope: str, value: Any) -> None:
    record = stored("trace", _sample_body()) | {envelope: value}
    with pytest.raises(ValidationError):
        StoredEvent.model_validate(record)
    for views in WORKER_VIEWS.values():
        with pytest.raises(msgspec.ValidationError):
            record_decoder(views["trace"]).decode(orjson.dumps(record))


def test_views_require_a_timezone_on_the_envelope_times() -> None:
    # Stricter than StoredEvent, on purpose: the API always writes an offset, and a naive
    # received_at would break the runtime's delay arithmetic (an endless retry, not a dead letter).
    record = stored("trace", _sample_body()) | {"received_at": "2026-01-01T00:00:00"}
    with pytest.raises(msgspec.ValidationError, match="timezone"):
        record_decoder(METRICS["trace"]).decode(orjson.dumps(record))
