"""The simulator's `reformulations` incident moves the drift worker's reformulation rate on its intent only.

Simulated traces (the app's own embeddings on every query) go through the real
processor and Redis; the rate is read as the recording rule defines it
(reformulated / compared follow-ups, docs/reformulations.md).
"""

from __future__ import annotations

from datetime import UTC, datetime

import redis
from prometheus_client import CollectorRegistry

from service.simulate.scenario import parse_scenario
from service.simulate.stream import generate_events
from tests.support.decoded import decoded_event
from tests.support.simulated import stored_record
from tests.workers.drift.drift_support import build_processor
from workers.drift.config import DriftConfig
from workers.drift.views import VIEWS

START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


def _rates(incident: bool, redis_client: redis.Redis) -> dict[str, float]:
    scenario = parse_scenario(
        {
            "seed": 11,
            "duration_s": 240,
            "rate": 20,
            "tenants": ["acme"],
            "sampling": {"embedding": 1.0},
            "incidents": [{"kind": "reformulations", "intent": "billing", "share": 0.8, "start_s": 0}]
            if incident
            else [],
        }
    )
    registry = CollectorRegistry()
    config = DriftConfig.model_validate(
        {"encoder": {"enabled": False}, "sessions": {"window_s": 300, "idle_s": 600}}
    )
    proc = build_processor(config, redis_client, registry)
    events = [
        decoded_event(stored_record(e, START), VIEWS, offset=i)
        for i, e in enumerate(generate_events(scenario, START))
        if e.type in ("trace", "feedback")
    ]
    for i in range(0, len(events), 200):
        proc.process(events[i : i + 200])

    def count(intent: str, outcome: str) -> float:
        labels = {"tenant": "acme", "intent": intent, "embedding": "app", "outcome": outcome}
        return registry.get_sample_value("ragmon_feedback_followups_total", labels) or 0.0

    rates = {}
    for intent in ("billing", "account"):
        reformulated, different = count(intent, "reformulated"), count(intent, "different")
        assert reformulated + different >= 20, (intent, reformulated, different)
        rates[intent] = reformulated / (reformulated + different)
    redis_client.flushdb()
    return rates


def test_the_reformulations_incident_raises_the_rate_on_its_intent_only(redis_client: redis.Redis) -> None:
    clean, incident = _rates(False, redis_client), _rates(True, redis_client)
    assert incident["billing"] > clean["billing"] + 0.3
    assert abs(incident["account"] - clean["account"]) < 0.15
