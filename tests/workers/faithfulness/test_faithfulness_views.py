"""The faithfulness worker's view: the runtime decodes a trace once into it, and a record whose
read fields break the contract still goes to the dead-letter topic with the field and rule named."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from service.contracts import TraceBody
from tests.support.kafka import stored, trace_body
from tests.support.records import FakeRecord
from workers.faithfulness.processor import FaithfulnessProcessor
from workers.faithfulness.views import FaithfulnessTrace
from workers.runtime.decode import RecordDecoder, Undecodable
from workers.runtime.types import Event

DECODER = RecordDecoder(FaithfulnessProcessor.views)


def test_the_processor_names_its_view_and_the_view_holds_what_the_planner_reads() -> None:
    body = trace_body(
        1,
        variant="rerank-v2",
        sample_rate=0.25,
        retrieval={"documents": [{"id": "a", "text": "First."}, {"id": "b", "text": ""}]},
        answer={"text": "An answer.", "refused": False, "citations": ["a"]},
    )
    out = DECODER.decode(FakeRecord(orjson.dumps(stored("trace", body))), "trace")
    assert isinstance(out, Event) and isinstance(out.body, FaithfulnessTrace)
    full = TraceBody.model_validate(body)
    view = out.body
    assert (view.trace_id, view.request_id, view.variant, view.release, view.intent, view.sample_rate) == (
        full.trace_id,
        full.request_id,
        full.variant,
        full.release,
        full.intent,
        full.sample_rate,
    )
    assert (view.answer.text, view.answer.refused) == (full.answer.text, full.answer.refused)
    assert [d.text for d in view.retrieval.documents] == [d.text for d in full.retrieval.documents]
    assert not hasattr(view, "query") and not hasattr(view, "usage")  # skipped, never built


def test_defaults_match_the_contract() -> None:
    body = {"trace_id": "t", "request_id": "r", "query": {"text": "q"}}
    out = DECODER.decode(FakeRecord(orjson.dumps(stored("trace", body))), "trace")
    assert isinstance(out, Event)
    full = TraceBody.model_validate(body)
    assert (
        out.body.variant,
        out.body.sample_rate,
        out.body.answer.text,
        out.body.answer.refused,
        out.body.retrieval.documents,
    ) == (full.variant, full.sample_rate, "", False, [])


@pytest.mark.parametrize(
    ("body", "detail_part"),
    [
        (trace_body(1, answer={"text": "x" * 32_769}), "record.body.answer.text"),
        (trace_body(1, answer={"text": 7}), "record.body.answer.text"),
        (trace_body(1, retrieval={"documents": [{"id": "a"}]}), "record.body.retrieval.documents[0].text"),
        (
            trace_body(1, retrieval={"documents": [{"id": "a", "text": "x" * 32_769}]}),
            "record.body.retrieval.documents[0].text",
        ),
        (trace_body(1, request_id="has space"), "record.body.request_id"),
        (trace_body(1, sample_rate=0), "record.body.sample_rate"),
        ({k: v for k, v in trace_body(1).items() if k != "request_id"}, "record.body.request_id"),
    ],
)
def test_a_broken_read_field_is_a_dead_letter_naming_it(body: dict[str, Any], detail_part: str) -> None:
    value = orjson.dumps(stored("trace", body))
    out = DECODER.decode(FakeRecord(value), "trace")
    assert isinstance(out, Undecodable)
    assert (out.reason, out.value) == ("invalid_body", value)
    assert detail_part in out.detail, out.detail


def test_a_spelling_the_contract_coerces_is_read_as_the_contract_reads_it() -> None:
    body = trace_body(1, sample_rate="0.5", answer={"text": "a", "refused": "yes"})
    out = DECODER.decode(FakeRecord(orjson.dumps(stored("trace", body))), "trace")
    assert isinstance(out, Event)
    assert (out.body.sample_rate, out.body.answer.refused) == (0.5, True)
