"""The session-finish check: a process a test leaves running fails the run and is stopped by PID."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.leaks import live_descendants

ROOT = Path(__file__).resolve().parents[1]

LEAKY = """
import subprocess


def test_leaves_a_server_running(tmp_path):
    # Its own session, as our servers are started: not in pytest's process group.
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True, stdout=subprocess.DEVNULL)
    (tmp_path.parent / "direct.pid").write_text(str(proc.pid))


def test_leaves_an_orphan(tmp_path):
    # The parent exits at once: the grandchild would be re-parented to init without the subreaper.
    out = subprocess.run(["bash", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True, check=True)
    (tmp_path.parent / "orphan.pid").write_text(out.stdout.strip())
"""

TIDY = """
import subprocess


def test_stops_what_it_starts():
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
"""


def _run(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_inner.py").write_text(source)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    base = tmp_path / "base"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.support.leaks",
            "-p",
            "no:cacheprovider",
            f"--basetemp={base}",
            str(tmp_path / "test_inner.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_leaked_process_fails_the_session_and_is_stopped(tmp_path: Path) -> None:
    result = _run(tmp_path, LEAKY)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "2 passed" in out and "outlived the session" in out, out
    for name in ("direct.pid", "orphan.pid"):
        pid = int((tmp_path / "base" / name).read_text())
        assert f"pid {pid}: sleep 300" in out, out
        assert not _alive(pid), f"{name} {pid} still running"


@pytest.mark.slow
def test_a_tidy_session_passes(tmp_path: Path) -> None:
    result = _run(tmp_path, TIDY)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outlived" not in result.stdout


def test_this_session_has_no_stray_descendant_right_now() -> None:
    """The check sees this very process tree: nothing but pytest's own short-lived helpers runs here."""
    assert all(_alive(p) for p in live_descendants(os.getpid()))
