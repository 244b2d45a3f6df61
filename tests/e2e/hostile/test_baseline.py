"""The suite's yardstick: the victim's traffic with no attacker is accepted, quick and processed."""

from __future__ import annotations

import time

import pytest

from tests.e2e.hostile.victim import Tenant, VictimTraffic, assert_unharmed, queries_counted, wait_processed
from tests.e2e.stack import UpStack

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("otlp", [False, True], ids=["native", "otlp"])
def test_undisturbed_victim_traffic_is_accepted_and_processed(
    hostile_stack: UpStack, victim: Tenant, otlp: bool
) -> None:
    before = queries_counted(hostile_stack, victim.name)
    with VictimTraffic(victim, otlp=otlp) as traffic:
        time.sleep(3)
    assert_unharmed(traffic.report)
    wait_processed(hostile_stack, victim.name, before + traffic.report.accepted_traces)
