"""Issue 23 item 5, live: an event id is the idempotency key of the tenant that sent it, not of everyone.

Before: the attacker sending first the event id the victim was about to use made the workers drop the
victim's event as a duplicate of the attacker's.
"""

from __future__ import annotations

import uuid

import orjson
import pytest

from tests.e2e.hostile.victim import Tenant, queries_counted, settled_count, wait_processed
from tests.e2e.stack import UpStack
from tests.service.api.api_events import trace_event

pytestmark = pytest.mark.slow


def send(tenant: Tenant, event: dict[str, object]) -> None:
    r = tenant.post("/v1/events", orjson.dumps({"events": [event]}))
    assert r.status_code == 202, r.text[:300]


def test_the_same_event_id_from_two_tenants_is_counted_once_for_each(
    hostile_stack: UpStack, attacker: Tenant, victim: Tenant
) -> None:
    ids = [str(uuid.uuid4()) for _ in range(5)]
    # counts once earlier tests' traffic is consumed (their last batches may still be in the pipeline)
    attacker_before = settled_count(hostile_stack, attacker.name)
    victim_before = settled_count(hostile_stack, victim.name)
    for event_id in ids:
        send(attacker, {**trace_event(), "id": event_id})
    wait_processed(hostile_stack, attacker.name, attacker_before + len(ids))
    for event_id in ids:
        send(victim, {**trace_event(), "id": event_id})
        send(victim, {**trace_event(), "id": event_id})  # a resend of the victim's own: counted once
    wait_processed(hostile_stack, victim.name, victim_before + len(ids))
    for event_id in ids:  # the attacker replays its own ids: still duplicates for the attacker
        send(attacker, {**trace_event(), "id": event_id})
    send(victim, trace_event())  # a marker: once it is counted, everything before it was consumed
    wait_processed(hostile_stack, victim.name, victim_before + len(ids) + 1)
    assert queries_counted(hostile_stack, victim.name) == victim_before + len(ids) + 1
    assert queries_counted(hostile_stack, attacker.name) == attacker_before + len(ids)
