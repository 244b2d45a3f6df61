"""`ragmon up` supervises its processes for real: kill -9 a worker, the API, Redis, the broker."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from service.local.embedded import free_port
from tests.support.kafka import wait_until
from tests.support.leaks import command_line, live_descendants, stop_pids
from tests.support.workers import metric_sum, parse_metrics

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Up:
    proc: subprocess.Popen[bytes]
    out: Path
    api: str = ""
    worker: str = ""
    supervisor: str = ""

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def pid_of(self, pattern: str) -> int:
        found = [p for p in live_descendants(self.proc.pid) if re.search(pattern, command_line(p))]
        assert len(found) == 1, (pattern, [command_line(p) for p in live_descendants(self.proc.pid)])
        return found[0]

    def ok(self, url: str) -> bool:
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def restarts(self, process: str) -> float:
        return metric_sum(
            parse_metrics(httpx.get(self.supervisor, timeout=2).text),
            "ragmon_supervisor_restarts_total",
            process=process,
        )


@contextlib.contextmanager
def running_up(
    tmp_path: Path,
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Up]:
    """`ragmon up ARGS` on free ports; stopped (with every child, by PID) whatever happens."""
    out = tmp_path / "up.out"
    base = {k: v for k, v in os.environ.items() if k != "RAGMON_KAFKA_BOOTSTRAP_SERVERS"}
    base["PYTHONPATH"] = str(ROOT) + os.pathsep + base.get("PYTHONPATH", "")
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "service.cli",
                "up",
                "--no-prometheus",
                "--workdir",
                str(tmp_path / "up"),
                "--api-port",
                str(free_port()),
                *args,
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**base, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True,
            cwd=cwd,
        )
    running = Up(proc, out)
    children: list[int] = []
    try:
        wait_until(
            lambda: "Ctrl-C stops everything" in running.text() or proc.poll() is not None,
            60,
            what="ragmon up summary",
        )
        text = running.text()
        assert proc.poll() is None, text
        running.api = re.search(r"API\s+(http://\S+)", text).group(1)  # type: ignore[union-attr]
        running.worker = re.search(r"worker \w+\s+(http://\S+)/metrics", text).group(1)  # type: ignore[union-attr]
        running.supervisor = re.search(r"supervisor\s+(http://\S+/metrics)", text).group(1)  # type: ignore[union-attr]
        children = live_descendants(proc.pid)
        yield running
    finally:
        children = live_descendants(proc.pid) or children
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        ours = set(live_descendants(os.getpid()))
        stop_pids([p for p in children if p in ours])


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    with running_up(
        tmp_path, "--workers", "metrics", "--max-crashes", "2", "--crash-window", "120"
    ) as running:
        yield running


@pytest.mark.slow
def test_crashed_processes_are_restarted_until_one_crashes_too_often(up: Up) -> None:
    text = up.text()
    assert "Kafka: embedded Tansu broker" in text and "memory-only" in text
    assert "set RAGMON_KAFKA_BOOTSTRAP_SERVERS=host:port to use a durable Kafka" in text
    wait_until(lambda: up.ok(up.worker + "/readyz"), 60, what="worker ready")

    os.kill(up.pid_of(r"service\.cli worker metrics|workers\.metrics"), signal.SIGKILL)
    wait_until(lambda: "worker-metrics exited with -9 (crash 1 of 2" in up.text(), 10, what="the crash line")
    wait_until(lambda: up.ok(up.worker + "/readyz"), 60, what="the restarted worker ready on its port")
    assert up.restarts("worker-metrics") == 1

    os.kill(up.pid_of(r"service\.cli api"), signal.SIGKILL)
    wait_until(lambda: "api exited with -9" in up.text(), 10, what="the API crash line")
    wait_until(lambda: up.ok(up.api + "/readyz"), 60, what="the restarted API ready")
    assert up.restarts("api") == 1

    os.kill(up.pid_of(r"redis-server"), signal.SIGKILL)
    wait_until(lambda: "redis exited with -9" in up.text(), 10, what="the Redis crash line")
    assert "lost: dedupe keys" in up.text()
    wait_until(lambda: up.restarts("redis") == 1 and up.ok(up.api + "/readyz"), 30, what="Redis back")

    os.kill(up.pid_of(r"service\.cli worker metrics|workers\.metrics"), signal.SIGKILL)
    assert up.proc.wait(60) == 1
    assert "worker-metrics crashed 2 times within 120s (limit 2): giving up" in up.text()
    assert live_descendants(up.proc.pid) == []


@pytest.mark.slow
def test_the_broker_dying_stops_up_and_says_what_was_lost(up: Up) -> None:
    os.kill(up.pid_of(r"broker --listener-url"), signal.SIGKILL)
    assert up.proc.wait(60) == 1
    text = up.text()
    assert "tansu exited with -9: lost every topic, every event accepted but not yet processed" in text, text
    assert "restart" not in text.split("tansu exited", 1)[1].split("\n", 1)[0]
