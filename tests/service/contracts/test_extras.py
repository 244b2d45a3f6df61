"""A worker whose extra is missing says so once and exits 78; drift runs reduced; the supervisor calls it off.

Before: without torch the faithfulness worker died with ModuleNotFoundError five times in 20 s and
`ragmon up` gave up and stopped the whole stack; drift waited for its encoder for ever.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from service.contracts.extras import DRIFT_ENCODER_MODULES, EXIT_EXTRA_MISSING, FAITHFULNESS_MODULES, missing
from service.local.embedded import ChildProcess, Stack
from service.local.metrics import SupervisorMetrics
from service.local.supervise import RestartPolicy, Supervisor
from service.local.up import _status_line
from workers.drift.__main__ import reduced_without_ml
from workers.drift.config import DriftConfig

# Run a module as `python -m` would, with these modules made unimportable (as on a bare install).
WITHOUT = (
    "import runpy, sys\n"
    "for name in sys.argv[2].split(','): sys.modules[name] = None\n"
    "sys.argv = [sys.argv[1]]\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


def run_without(module: str, blocked: tuple[str, ...], log: Path | None = None) -> subprocess.Popen[bytes]:
    out = open(log, "ab") if log else subprocess.PIPE  # noqa: SIM115 - the child's
    return subprocess.Popen(
        [sys.executable, "-c", WITHOUT, module, ",".join(blocked)],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_missing_names_what_cannot_be_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing(("json", "no_such_module_xyz", "no_such.sub")) == ["no_such_module_xyz", "no_such.sub"]
    monkeypatch.setitem(sys.modules, "torch", None)
    assert missing(FAITHFULNESS_MODULES) == ["torch"]


@pytest.mark.slow
def test_the_faithfulness_worker_without_torch_exits_78_with_one_line_naming_the_extra() -> None:
    proc = run_without("workers.faithfulness", ("torch",))
    out, _ = proc.communicate(timeout=60)
    lines = out.decode().strip().splitlines()
    assert proc.returncode == EXIT_EXTRA_MISSING, out.decode()
    assert lines == [
        "worker faithfulness: off: the 'ml' extra is not installed (no module torch); "
        "fix: pip install 'ragmon[ml]'"
    ]


def test_drift_without_its_encoder_modules_runs_on_app_embeddings(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = DriftConfig()
    assert config.encoder.enabled and reduced_without_ml(config) is config  # ml installed here: unchanged
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    reduced = reduced_without_ml(config)
    assert not reduced.encoder.enabled and reduced.app_embeddings.enabled
    assert "worker drift: reduced" in caplog.text and "pip install 'ragmon[ml]'" in caplog.text
    assert missing(DRIFT_ENCODER_MODULES) == ["sentence_transformers"]


@pytest.mark.slow
def test_the_supervisor_calls_a_worker_off_for_want_of_an_extra_and_not_a_crash(tmp_path: Path) -> None:
    stack = Stack()
    registry = CollectorRegistry()
    lines: list[str] = []
    sup = Supervisor(stack, RestartPolicy(max_crashes=1), SupervisorMetrics(registry), say=lines.append)
    log = tmp_path / "worker-faithfulness.log"
    child = stack.add(
        ChildProcess("worker-faithfulness", run_without("workers.faithfulness", ("torch",), log), 0, log)
    )
    sup.watch(child, None)
    child.proc.wait(60)
    for now in (1.0, 2.0, 100.0):  # max_crashes=1: a crash would have raised GiveUp at once
        sup.check(now=now)
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "worker-faithfulness exited with 78, not a crash, not restarted: the 'ml' extra is not "
        "installed (no module torch)"
    )
    assert "pip install 'ragmon[ml]'" in lines[0]
    assert (
        registry.get_sample_value("ragmon_supervisor_restarts_total", {"process": "worker-faithfulness"})
        is None
    )
    assert stack.children == [child] and not child.alive()
    status = _status_line("http://127.0.0.1:9", {"faithfulness": 9, "metrics": 9}, sup.off)
    assert "faithfulness=" not in status and "metrics=" in status
    assert "| faithfulness off: the 'ml' extra is not installed (no module torch); fix: pip install" in status


@pytest.mark.slow
def test_a_worker_exiting_78_without_a_log_line_is_still_off(tmp_path: Path) -> None:
    stack = Stack()
    lines: list[str] = []
    sup = Supervisor(
        stack, RestartPolicy(max_crashes=1), SupervisorMetrics(CollectorRegistry()), say=lines.append
    )
    proc = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({EXIT_EXTRA_MISSING})"])
    proc.wait(30)
    child = stack.add(ChildProcess("worker-x", proc, 0, None))
    sup.watch(child, None)
    sup.check(now=1)
    assert sup.off == {"worker-x": "an optional extra it needs is not installed"} and len(lines) == 1
