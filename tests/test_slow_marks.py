"""The slow-mark plugin (tests/support/slowmark.py): a test that starts a process unmarked fails."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest_plugins = ["pytester"]

INNER = """
import subprocess, sys
import pytest

def test_unmarked_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.mark.slow
def test_marked_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    yield proc
    proc.wait()

def test_unmarked_fixture_starts_a_process(child):
    assert child.pid

def test_pure():
    assert 1 + 1 == 2

def test_uses_the_broker(broker):
    pass

@pytest.fixture
def broker():
    return None
"""


def _run_inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.RunResult:
    """INNER's tests in a pytest of their own with only the slowmark plugin, `args` its further options."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_inner=INNER)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    return pytester.runpytest_subprocess("-p", "tests.support.slowmark", *args, "-p", "no:cacheprovider")


@pytest.mark.slow
def test_an_unmarked_test_that_starts_a_process_fails_naming_the_mark(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run_inner(pytester, monkeypatch, "-rA")
    result.assert_outcomes(passed=3, failed=1, errors=1)
    text = result.stdout.str()
    assert "test_unmarked_starts_a_process starts a process in its body" in text
    assert "test_unmarked_fixture_starts_a_process starts a process in its fixtures" in text
    assert sys.executable in text and "add @pytest.mark.slow" in text


@pytest.mark.slow
def test_a_test_on_the_session_servers_is_marked_slow_and_left_out_of_test_fast(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run_inner(pytester, monkeypatch, "-m", "not slow")
    result.assert_outcomes(passed=1, failed=1, errors=1, deselected=2)
