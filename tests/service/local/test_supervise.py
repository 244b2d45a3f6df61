"""The supervisor's policy on real processes: restart with backoff, give up after N crashes, never the broker."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from service.local.embedded import ChildProcess, Stack
from service.local.metrics import SupervisorMetrics
from service.local.supervise import GiveUp, RestartPolicy, Supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def sleeper(name: str, log: Path) -> ChildProcess:
    proc = subprocess.Popen(
        SLEEPER,
        stdout=open(log, "ab"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return ChildProcess(name, proc, 0, log)


@pytest.fixture
def stack() -> Iterator[Stack]:
    s = Stack()
    yield s
    for child in s.children:
        child.kill()


def make(
    stack: Stack, tmp_path: Path, policy: RestartPolicy
) -> tuple[Supervisor, list[str], CollectorRegistry]:
    registry = CollectorRegistry()
    lines: list[str] = []
    return Supervisor(stack, policy, SupervisorMetrics(registry), say=lines.append), lines, registry


def restarts(registry: CollectorRegistry, name: str) -> float:
    return registry.get_sample_value("ragmon_supervisor_restarts_total", {"process": name}) or 0.0


@pytest.mark.slow
def test_a_crashed_worker_is_restarted_with_backoff_and_counted(stack: Stack, tmp_path: Path) -> None:
    sup, lines, registry = make(
        stack, tmp_path, RestartPolicy(max_crashes=3, window_s=60, initial_backoff_s=1)
    )
    worker = stack.add(sleeper("worker-metrics", tmp_path / "w.log"))
    sup.watch(worker, None)
    sup.check(now=0)
    assert lines == [] and restarts(registry, "worker-metrics") == 0

    worker.kill()
    sup.check(now=10)
    assert len(lines) == 1 and lines[0].startswith(
        "worker-metrics exited with -9 (crash 1 of 3 allowed within 60s)"
    )
    assert "restarting in 1s" in lines[0] and "redelivered" in lines[0]
    sup.check(now=10.5)  # backoff not over
    assert stack.children[0] is worker
    sup.check(now=11)
    fresh = stack.children[0]
    assert fresh is not worker and fresh.alive() and fresh.name == "worker-metrics"
    assert restarts(registry, "worker-metrics") == 1

    fresh.kill()
    sup.check(now=20)
    assert "crash 2 of 3" in lines[1] and "restarting in 2s" in lines[1]  # the backoff doubles
    sup.check(now=22)
    stack.children[0].kill()
    with pytest.raises(GiveUp, match=r"worker-metrics crashed 3 times within 60s \(limit 3\): giving up"):
        sup.check(now=30)


@pytest.mark.slow
def test_crashes_outside_the_window_are_forgotten(stack: Stack, tmp_path: Path) -> None:
    sup, lines, registry = make(
        stack, tmp_path, RestartPolicy(max_crashes=2, window_s=60, initial_backoff_s=1)
    )
    sup.watch(stack.add(sleeper("api", tmp_path / "api.log")), None)
    for i, now in enumerate((0.0, 100.0, 200.0)):
        stack.children[0].kill()
        sup.check(now=now)
        assert "crash 1 of 2" in lines[i], lines
        sup.check(now=now + 1)
    assert restarts(registry, "api") == 3 and stack.children[0].alive()


@pytest.mark.slow
def test_the_memory_only_broker_is_never_restarted_and_its_loss_is_named(
    stack: Stack, tmp_path: Path
) -> None:
    sup, _, _ = make(stack, tmp_path, RestartPolicy())
    broker = stack.add(sleeper("tansu", tmp_path / "tansu.log"))
    sup.watch(broker, None, restart=False)
    broker.kill()
    with pytest.raises(GiveUp) as failure:
        sup.check(now=1)
    message = str(failure.value)
    assert "every event accepted but not yet processed" in message
    assert "memory-only" in message and "RAGMON_KAFKA_BOOTSTRAP_SERVERS" in message


@pytest.mark.slow
def test_a_custom_respawn_that_fails_counts_as_a_crash_and_is_retried(stack: Stack, tmp_path: Path) -> None:
    """PostgreSQL is restarted by its own respawn (old backends killed, its user, same port); when that
    start fails, the failure is one more crash with its backoff, not the end of `ragmon up`."""
    from service.local.embedded import EmbeddedError

    sup, lines, registry = make(
        stack, tmp_path, RestartPolicy(max_crashes=3, window_s=60, initial_backoff_s=1)
    )
    pg = stack.add(sleeper("postgres", tmp_path / "pg.log"))
    attempts: list[int] = []

    def respawn() -> ChildProcess:
        attempts.append(1)
        if len(attempts) == 1:
            raise EmbeddedError("postgres not accepting connections within 30s")
        return sleeper("postgres", tmp_path / "pg.log")

    sup.watch(pg, None, respawn=respawn)
    pg.kill()
    sup.check(now=0)
    assert "postgres exited with -9 (crash 1 of 3" in lines[0] and "lost: nothing committed" in lines[0]
    sup.check(now=1)  # the first respawn fails: said, counted as crash 2, backoff doubled
    assert lines[1] == "postgres did not start again: postgres not accepting connections within 30s"
    assert "crash 2 of 3" in lines[2] and "restarting in 2s" in lines[2]
    assert stack.children[0] is pg and restarts(registry, "postgres") == 0
    sup.check(now=3)
    assert stack.children[0] is not pg and stack.children[0].alive() and restarts(registry, "postgres") == 1
