"""Limits before memory, one bad record refused alone, connection limits, depth (issue 23, items 2, 3, 7, 11).

Each attack is sent with the attacker's key against the live stack while the victim's ordinary
traffic runs; the attack gets its refusal and the victim is unharmed: every batch accepted and
processed, none held, /healthz answering.
"""

from __future__ import annotations

import time

import pytest

from tests.e2e.hostile.limits_attacks import ATTACKS, closed_by_server, slow_clients
from tests.e2e.hostile.victim import Tenant, VictimTraffic, assert_unharmed, queries_counted, wait_processed
from tests.e2e.stack import UpStack

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_the_attack_is_refused_and_the_victim_unharmed(
    hostile_stack: UpStack, attacker: Tenant, victim: Tenant, attack: str
) -> None:
    before = queries_counted(hostile_stack, victim.name)
    with VictimTraffic(victim, otlp=attack in ("empty_resource_spans", "huge_attribute")) as traffic:
        time.sleep(0.5)
        for _ in range(3):
            ATTACKS[attack](attacker)
        time.sleep(0.5)
    assert_unharmed(traffic.report)
    wait_processed(hostile_stack, victim.name, before + traffic.report.accepted_traces)


def test_half_sent_requests_are_closed_and_the_victim_unharmed(
    hostile_stack: UpStack, attacker: Tenant, victim: Tenant
) -> None:
    """300 half-sent requests: once held for good; now closed at the header deadline (10 s)."""
    before = queries_counted(hostile_stack, victim.name)
    with VictimTraffic(victim) as traffic:
        started = time.monotonic()
        held = slow_clients(attacker, 300, hold_s=1.0)
        closed = [closed_by_server(sock, max(0.1, 14 - (time.monotonic() - started))) for sock in held]
        elapsed = time.monotonic() - started
    for sock in held:
        sock.close()
    assert all(closed), (
        f"{closed.count(False)} of {len(held)} half-sent requests still open after {elapsed:.1f}s"
    )
    assert_unharmed(traffic.report, min_batches=20)
    wait_processed(hostile_stack, victim.name, before + traffic.report.accepted_traces)
