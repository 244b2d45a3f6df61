"""The `slow` mark is on every test that starts a real process, so `make test-fast` stays fast.

Two halves:
- at collection, a test whose fixtures start the session's real servers (the
  broker, Redis, PostgreSQL) is marked slow;
- at run time, a test that is not marked slow and starts a process anyway (in
  its body or in one of its fixtures: subprocess, asyncio's subprocesses,
  multiprocessing) fails, naming the command, so the mark is added where the
  process is started instead of being forgotten.

Loaded by tests/conftest.py; `python -m pytest -p tests.support.slowmark` loads it alone.
"""

from __future__ import annotations

import multiprocessing.process
import subprocess
from collections.abc import Generator
from typing import Any

import pytest

SERVER_FIXTURES = frozenset({"broker", "redis_server", "postgres_server"})

_started: list[str] = []
_original_popen_init = subprocess.Popen.__init__
_original_process_start = multiprocessing.process.BaseProcess.start


def _command(args: Any) -> str:
    if isinstance(args, str | bytes):
        return str(args)
    return " ".join(str(a) for a in args)[:200]


def _popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
    _started.append(_command(args))
    _original_popen_init(self, args, *rest, **kwargs)


def _process_start(self: multiprocessing.process.BaseProcess) -> None:
    _started.append(f"multiprocessing {self.name}")
    _original_process_start(self)


def install() -> None:
    if subprocess.Popen.__init__ is _popen_init:
        return
    subprocess.Popen.__init__ = _popen_init  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = _process_start  # type: ignore[method-assign]


def pytest_sessionstart(session: pytest.Session) -> None:
    install()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_server_tests(items)


def mark_server_tests(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _check(item: pytest.Item, phase: str) -> None:
    started, _started[:] = list(_started), []
    if started and item.get_closest_marker("slow") is None:
        raise pytest.fail.Exception(
            f"{item.nodeid} starts a process in its {phase} ({started[0]!r}"
            f"{f' and {len(started) - 1} more' if len(started) > 1 else ''}) but is not marked slow: "
            "add @pytest.mark.slow (or pytestmark) so `make test-fast` leaves it out",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    _started.clear()
    result = yield
    _check(item, "fixtures")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    _started.clear()
    result = yield
    _check(item, "body")
    return result
