"""The exclusion worker emits one ExclusionResultEvent per evaluation made from a trace (scores topic)."""

from __future__ import annotations

import redis
from prometheus_client import CollectorRegistry

from service.contracts.scores import ExclusionResultEvent
from tests.workers.exclusion.exclusion_events import candidate, trace
from workers.exclusion.config import ExclusionConfig
from workers.exclusion.metrics import ExclusionMetrics
from workers.exclusion.processor import ExclusionProcessor

BROKEN = [candidate("g1", "en-GB", 0.95), candidate("x", "en-US", 0.3)]


class RecordingEmitter:
    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes]] = []

    def emit(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None:
        self.records.append((topic, key, value))

    def wait(self, timeout_s: float = 15.0) -> None:
        return None


def test_one_result_event_per_evaluated_sample(redis_client: redis.Redis, config: ExclusionConfig) -> None:
    emitter = RecordingEmitter()
    proc = ExclusionProcessor(
        redis_client,
        ExclusionMetrics(CollectorRegistry(), config),
        config,
        emitter=emitter,
        scores_topic="x.scores",
    )
    broken = trace("t1", candidates=BROKEN)
    proc.process([broken, trace("t2", candidates=BROKEN, gold_ids=["x"]), trace("t3")])  # t3: no sample
    events = [ExclusionResultEvent.model_validate_json(v) for _, _, v in emitter.records]
    assert [e.trace_id for e in events] == ["t1", "t2"]
    by = {e.trace_id: e for e in events}
    assert (by["t1"].gold_source, by["t1"].falsely_excluded, by["t1"].request_id) == ("proxy", True, "req-t1")
    assert [(g.doc_id, g.predicates) for g in by["t1"].excluded_gold] == [("g1", ["locale eq"])]
    assert (by["t2"].gold_source, by["t2"].falsely_excluded) == ("labels", False)
    assert {topic for topic, _, _ in emitter.records} == {"x.scores"}
    assert emitter.records[0][1] == b"acme/req-t1"  # keyed like its trace: twins share a partition
    proc.process([broken])  # redelivered: the same id, or nothing
    assert {e.event_id for e in events} >= {
        ExclusionResultEvent.model_validate_json(v).event_id for _, _, v in emitter.records
    }
