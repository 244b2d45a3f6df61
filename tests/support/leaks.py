"""No process started by the test session may outlive it.

At start the pytest process becomes a child subreaper (Linux prctl), so a
grandchild whose parent died (a worker of a `ragmon up` that was killed) is
re-parented to pytest instead of init and stays visible. At the end, after
every fixture was torn down, any descendant still alive is a leak: it is
named, stopped by its PID, and the session fails.

Loaded by tests/conftest.py; `python -m pytest -p tests.support.leaks` loads it alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) from /proc/PID/stat; None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), fields[0]


def live_descendants(root: int) -> list[int]:
    """Live (not zombie) descendants of `root`, parents before children."""
    parent_of: dict[int, int] = {}
    zombies = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found:
                parent_of[int(entry.name)] = found[0]
                if found[1] == "Z":
                    zombies.add(int(entry.name))
    out, frontier = [], [root]
    while frontier:
        kids = [p for p, pp in parent_of.items() if pp in frontier]
        out += kids
        frontier = kids
    return [p for p in out if p not in zombies]


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def stop_pids(pids: list[int], grace_s: float = 5.0) -> None:
    """SIGTERM each, then SIGKILL what is still alive after the grace period; by PID only."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            _reap()
            time.sleep(0.05)
    _reap()


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """SIGTERM a process this test started, SIGKILL it after the grace period, and reap it."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _alive(pid: int) -> bool:
    found = _stat(pid)
    return found is not None and found[1] != "Z"


def _reap() -> None:
    """Collect exited children re-parented to us (we are their subreaper)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def pytest_configure(config: pytest.Config) -> None:
    become_subreaper()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    leaked = live_descendants(os.getpid())
    if not leaked:
        return
    names = "\n".join(f"  pid {p}: {command_line(p)[:200]}" for p in leaked)
    stop_pids(leaked)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"processes started by the tests outlived the session (now stopped by PID):\n{names}"
    if reporter is not None:
        reporter.write_line(message, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
