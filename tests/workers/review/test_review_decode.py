"""Score records through the runtime's decoder: typed score events, bad ones dead-lettered with the field."""

from __future__ import annotations

import orjson

from service.contracts import FeedbackBody
from service.contracts.scores import FaithfulnessScoreEvent, score_record
from tests.support.kafka import stored, trace_body
from tests.support.records import FakeRecord
from tests.workers.review.helpers import faithfulness_event
from workers.review.sampler import display_content
from workers.review.views import VIEWS, ReviewFeedback, ReviewTrace
from workers.runtime.decode import RecordDecoder, Undecodable, decode_record
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import Event


def test_score_record_decodes_to_its_event() -> None:
    body = faithfulness_event(1, 0.3).body
    assert isinstance(body, FaithfulnessScoreEvent)
    _, value, headers = score_record(body)
    event = decode_record(FakeRecord(value, headers, "p.scores", offset=3), "score")
    assert not isinstance(event, Undecodable)
    assert event.body == body and event.id == str(body.event_id) and event.tenant == "acme"


def test_invalid_score_is_dead_lettered_with_the_field() -> None:
    bad = decode_record(
        FakeRecord(
            b'{"type": "faithfulness_score", "tenant": "acme"}',
            [("ragmon-event-type", b"faithfulness_score")],
        ),
        "score",
    )
    assert (
        isinstance(bad, Undecodable)
        and bad.reason == DeadLetterReason.INVALID_SCORE
        and "score" in bad.detail
    )


# -- traces and feedback through the sampler's views ------------------------------------------------------


def _view_decode(record: dict[str, object], event_type: str) -> object:
    return RecordDecoder(VIEWS).decode(FakeRecord(orjson.dumps(record), topic=f"p.{event_type}"), event_type)


def test_trace_decodes_into_the_review_view_with_what_the_page_shows() -> None:
    body = trace_body(
        4,
        retrieval={
            "documents": [{"id": "d1", "text": "ctx", "score": 0.7, "metadata": {"a": 1}}],
            "exclusion_sample": {"candidates": [{"id": "c1", "score": 0.2}], "gold_ids": ["c1"]},
        },
    )
    event = _view_decode(stored("trace", body), "trace")
    assert isinstance(event, Event) and isinstance(event.body, ReviewTrace)
    content = display_content(event.body)
    assert content["documents"] == [{"id": "d1", "text": "ctx", "score": 0.7}]
    assert content["candidates"] == [{"id": "c1", "score": 0.2}] and content["gold_ids"] == ["c1"]
    assert (content["query"], content["answer"], content["citations"]) == ("question 4", "answer", ["d4"])
    assert content["session_id"] is None  # the app sent none


def test_the_content_keeps_the_session_intent_variant_and_release_for_the_golden_split() -> None:
    body = trace_body(6, session_id="s-42", intent="billing", variant="rerank-v2", release="r7")
    event = _view_decode(stored("trace", body), "trace")
    assert isinstance(event, Event) and isinstance(event.body, ReviewTrace)
    content = display_content(event.body)
    assert (content["session_id"], content["intent"], content["variant"], content["release"]) == (
        "s-42",
        "billing",
        "rerank-v2",
        "r7",
    )


def test_bad_trace_is_dead_lettered_with_field_and_rule() -> None:
    body = trace_body(5, retrieval={"documents": [{"id": "not an id", "text": "ctx"}]})
    bad = _view_decode(stored("trace", body), "trace")
    assert isinstance(bad, Undecodable) and bad.reason == DeadLetterReason.INVALID_BODY
    assert "record.body.retrieval.documents[0].id" in bad.detail and "pattern" in bad.detail


def test_bad_feedback_value_is_dead_lettered_with_the_rule() -> None:
    bad = _view_decode(stored("feedback", {"trace_id": "t-1", "kind": "thumbs", "value": 0.5}), "feedback")
    assert isinstance(bad, Undecodable) and bad.reason == DeadLetterReason.INVALID_BODY
    assert "thumbs feedback needs value true/false or 1/-1" in bad.detail


def test_feedback_thumbs_read_as_the_contract_reads_them() -> None:
    for value, up in ((True, True), (1, True), (-1, False), (False, False)):
        event = _view_decode(
            stored("feedback", {"trace_id": "t-1", "kind": "thumbs", "value": value}), "feedback"
        )
        assert isinstance(event, Event) and isinstance(event.body, ReviewFeedback)
        assert (
            event.body.thumbs_up is FeedbackBody(trace_id="t-1", kind="thumbs", value=value).thumbs_up is up
        )


def test_a_spelling_the_contract_coerces_is_kept_not_dead_lettered() -> None:
    event = _view_decode(stored("trace", trace_body(6, sample_rate="0.5")), "trace")
    assert isinstance(event, Event) and event.body.sample_rate == 0.5
