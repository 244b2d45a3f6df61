"""The trace's `probe` mark and `retrieval.index_version`: the models, the API's fast structs and the
workers' view keep the same rules, and a broken mark is refused naming the field and the rule."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from pydantic import ValidationError

from service.contracts.errors import describe_errors
from service.contracts.events import TraceBody
from service.contracts.fast import check_body
from service.contracts.views import ProbeMark


def _probe_trace(**probe: Any) -> dict[str, Any]:
    return {
        "trace_id": "t1",
        "request_id": "r1",
        "query": {"text": "how do I reset my password", "embedding_model": "emb-v2"},
        "retrieval": {"documents": [{"id": "d1", "text": "x"}], "index_version": "2026-12-01"},
        "probe": probe,
    }


def test_a_probe_trace_is_accepted_by_models_and_fast_structs() -> None:
    body = _probe_trace(set="billing", query_id="q-001")
    parsed = TraceBody.model_validate(body)
    assert parsed.probe is not None and (parsed.probe.set, parsed.probe.query_id) == ("billing", "q-001")
    assert parsed.retrieval.index_version == "2026-12-01"
    assert check_body("trace", body)
    assert msgspec.convert(body["probe"], ProbeMark).query_id == "q-001"


@pytest.mark.parametrize(
    ("probe", "field", "rule"),
    [
        ({"set": "Billing Set", "query_id": "q1"}, "probe.set", "pattern"),
        ({"set": "billing", "query_id": "q 1"}, "probe.query_id", "pattern"),
        ({"set": "billing"}, "probe.query_id", "required"),
        ({"set": "billing", "query_id": "q1", "gold": ["d1"]}, "probe.gold", "not permitted"),
        ({"set": "", "query_id": "q1"}, "probe.set", "at least 1"),
    ],
)
def test_a_broken_mark_is_refused_naming_field_and_rule(probe: dict[str, Any], field: str, rule: str) -> None:
    body = _probe_trace(**probe)
    assert not check_body("trace", body)
    with pytest.raises(ValidationError) as exc:
        TraceBody.model_validate(body)
    message = describe_errors("body", exc.value)
    assert f"body.{field}" in message
    assert rule in message.lower()


def test_view_refuses_what_the_model_refuses() -> None:
    for bad in ({"set": "billing"}, {"set": "billing", "query_id": "q1", "x": 1}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, ProbeMark)
