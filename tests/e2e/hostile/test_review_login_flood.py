"""The unauthenticated sign-in form under attack: huge forms, multipart files and key guessing are refused
before anything is parsed, quickly, while the victim tenant's ingestion stays unharmed; and /metrics (every
tenant's name and traffic) is not on the port the attacker reaches."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.hostile.victim import Tenant, VictimTraffic, assert_unharmed, queries_counted, wait_processed
from tests.e2e.stack import UpStack

pytestmark = pytest.mark.slow
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _twenty_megabytes() -> Iterator[bytes]:
    yield b"key="
    for _ in range(320):
        yield b"a" * 65536


def test_login_floods_are_refused_before_parsing_and_the_victim_is_unharmed(
    hostile_stack: UpStack, attacker: Tenant, victim: Tenant
) -> None:
    login = hostile_stack.api + "/review/login"
    before = queries_counted(hostile_stack, victim.name)
    statuses: list[int] = []
    slowest = 0.0
    with VictimTraffic(victim) as traffic, httpx.Client(timeout=30) as client:
        token = client.get(hostile_stack.api + "/review")
        assert token.status_code == 200
        rounds, deadline = 0, time.monotonic() + 3  # the attack lasts while the victim sends batches
        while rounds < 5 or time.monotonic() < deadline:
            rounds += 1
            for send in (
                lambda: client.post(login, content=b"key=" + b"a" * (20 * 1024 * 1024), headers=FORM),
                lambda: client.post(login, content=_twenty_megabytes(), headers=FORM),
                lambda: client.post(login, files={"key": ("k", b"x" * (5 * 1024 * 1024))}),
                lambda: client.post(
                    login, content=b"&".join(b"f%d=1" % i for i in range(10_000)), headers=FORM
                ),
                lambda: client.post(login, data={"key": "rgm_guess", "csrf_token": "0" * 64}),
            ):
                started = time.perf_counter()
                try:
                    statuses.append(send().status_code)
                except httpx.HTTPError:  # the server may close a connection it refused mid-upload
                    statuses.append(0)
                slowest = max(slowest, time.perf_counter() - started)
        metrics = client.get(hostile_stack.api + "/metrics")
    assert_unharmed(traffic.report)
    wait_processed(hostile_stack, victim.name, before + traffic.report.accepted_traces)
    assert set(statuses) <= {0, 403, 413, 415, 429} and 500 not in statuses, statuses
    assert statuses.count(413) >= 10 and 415 in statuses, statuses
    assert slowest < 10, f"a refused form took {slowest:.1f}s"
    assert metrics.status_code == 404 and victim.name not in metrics.text
