"""Score records through the runtime's decoder: typed score events, bad ones dead-lettered with the field."""

from __future__ import annotations

from dataclasses import dataclass, field

from service.contracts.scores import FaithfulnessScoreEvent, score_record
from tests.workers.review.helpers import faithfulness_event
from workers.runtime.decode import Undecodable, decode_record
from workers.runtime.reasons import DeadLetterReason


@dataclass
class Record:
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    topic: str = "p.scores"
    partition: int = 0
    offset: int = 3
    key: bytes | None = None
    timestamp: int = 0


def test_score_record_decodes_to_its_event() -> None:
    body = faithfulness_event(1, 0.3).body
    assert isinstance(body, FaithfulnessScoreEvent)
    _, value, headers = score_record(body)
    event = decode_record(Record(value, headers), "score")
    assert not isinstance(event, Undecodable)
    assert event.body == body and event.id == str(body.event_id) and event.tenant == "acme"


def test_invalid_score_is_dead_lettered_with_the_field() -> None:
    bad = decode_record(Record(b'{"type": "faithfulness_score", "tenant": "acme"}',
                               [("ragmon-event-type", b"faithfulness_score")]), "score")
    assert isinstance(bad, Undecodable) and bad.reason == DeadLetterReason.INVALID_SCORE and "score" in bad.detail
