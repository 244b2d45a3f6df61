"""Redaction under attack: documents that are long runs built to make a PII pattern backtrack.

Before redaction was linear, one document of 32,767 address characters and an '@' took 1.35 s
of the API's CPU; a trace holds as many of them as fit in one record (MAX_RECORD_BYTES: 27 here). Now the whole trace costs milliseconds and the
victim's batches, sent meanwhile, are accepted as quickly as without an attacker.
"""

from __future__ import annotations

import time

import orjson
import pytest

from service.contracts import vocabulary as L
from tests.e2e.hostile.victim import Tenant, VictimTraffic, assert_unharmed
from tests.e2e.stack import UpStack
from tests.service.api.api_events import trace_event

pytestmark = pytest.mark.slow

SHAPES = (
    lambda n: "a" * (n - 1) + "@",  # the local-part run of the e-mail pattern
    lambda n: "a@" + "a." * ((n - 2) // 2),  # a run of labels after an '@'
    lambda n: "@" * n,
    lambda n: "a." * (n // 2),
)


# As many documents at the length limit as one record holds (a larger trace is refused before redaction).
DOCUMENTS = (L.MAX_RECORD_BYTES - 2 * L.MAX_ANSWER_CHARS) // L.MAX_DOCUMENT_CHARS - 1


def attack_trace(round_no: int) -> bytes:
    ev = trace_event()
    # Every document different (a cache of redacted documents must not be what saves the API).
    ev["body"]["retrieval"]["documents"] = [
        {
            "id": f"d-{round_no}-{j}",
            "text": SHAPES[j % len(SHAPES)](L.MAX_DOCUMENT_CHARS - round_no * 100 - j),
        }
        for j in range(DOCUMENTS)
    ]
    ev["body"]["answer"] = {"text": "a" * (L.MAX_ANSWER_CHARS - 1) + "@", "citations": []}
    return orjson.dumps({"events": [ev]})


def test_documents_of_backtracking_runs_cost_the_victim_nothing(
    hostile_stack: UpStack, attacker: Tenant, victim: Tenant
) -> None:
    statuses, elapsed = [], []
    with VictimTraffic(victim) as traffic:
        for round_no in range(5):
            body = attack_trace(round_no)
            started = time.perf_counter()
            statuses.append(attacker.post("/v1/events", body).status_code)
            elapsed.append(time.perf_counter() - started)
        time.sleep(1)
    assert_unharmed(traffic.report)
    assert statuses == [202] * 5, statuses  # accepted: long runs are ordinary text, just not slow
    # documents at the limit: linear redaction takes well under a second (quadratic: minutes)
    assert max(elapsed) < 5, elapsed
