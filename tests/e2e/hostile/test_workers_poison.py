"""Issue 23 item 4, live: deeply nested JSON in one attribute never stalls the assembler for anyone.

Before: 50 such OTLP traces of one tenant made every assembler tick raise RecursionError, and another
tenant's traces claimed in the same ticks stayed unassembled for good, nothing dead-lettered.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

from tests.e2e.hostile.victim import Tenant, VictimTraffic, assert_unharmed, queries_counted, wait_processed
from tests.e2e.stack import UpStack
from tests.workers.assembler.oi_spans import rag_trace, traces_data

pytestmark = pytest.mark.slow

DEPTH = 20_000
DEEP_FILTERS = "[" * DEPTH + "]" * DEPTH
ATTACK_TRACES = 50


def worker_metric(stack: UpStack, process: str, name: str, **labels: str) -> float:
    text = httpx.get(stack.workers[process] + "/metrics", timeout=10).text
    total = 0.0
    for m in re.finditer(rf"^{name}\{{(?P<labels>[^}}]*)\}} (?P<value>\S+)$", text, re.M):
        if all(f'{k}="{v}"' in m["labels"] for k, v in labels.items()):
            total += float(m["value"])
    return total


def wait_metric(
    stack: UpStack, process: str, name: str, expected: float, timeout_s: float = 60, **labels: str
) -> float:
    deadline = time.monotonic() + timeout_s
    seen = worker_metric(stack, process, name, **labels)
    while seen < expected and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = worker_metric(stack, process, name, **labels)
    return seen


def test_deeply_nested_filters_are_dead_lettered_and_the_victims_traces_all_assembled(
    hostile_stack: UpStack, attacker: Tenant, victim: Tenant
) -> None:
    dead_before = worker_metric(
        hostile_stack,
        "assembler",
        "ragmon_worker_dead_letters_total",
        worker="assembler",
        reason="invalid_body",
    )
    attacker_before = queries_counted(hostile_stack, attacker.name)
    victim_before = queries_counted(hostile_stack, victim.name)
    with VictimTraffic(victim, otlp=True, batch=5, interval_s=0.2) as traffic:
        for _ in range(ATTACK_TRACES // 10):
            spans = [
                s for _ in range(10) for s in rag_trace(root_attrs={"ragmon.retrieval.filters": DEEP_FILTERS})
            ]
            r = attacker.post("/v1/traces", traces_data(spans).SerializeToString(), "application/x-protobuf")
            # The attribute is a string: the API stores it; what it holds is the workers' to refuse.
            assert r.status_code in (200, 202), r.text[:300]
            time.sleep(0.3)
        time.sleep(3)
    assert_unharmed(traffic.report)
    wait_processed(hostile_stack, victim.name, victim_before + traffic.report.accepted_traces)
    dead = wait_metric(
        hostile_stack,
        "assembler",
        "ragmon_worker_dead_letters_total",
        dead_before + ATTACK_TRACES,
        worker="assembler",
        reason="invalid_body",
    )
    assert dead - dead_before == ATTACK_TRACES, "each poison trace dead-lettered once, with its reason"
    assert queries_counted(hostile_stack, attacker.name) == attacker_before, "no poison trace was counted"
    assert worker_metric(hostile_stack, "assembler", "ragmon_assembler_pending_traces") == 0, (
        "nothing left to claim again"
    )
