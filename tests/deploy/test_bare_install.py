"""`pip install ragmon` runs: the built wheel, bare and then with `[ml]`, in a fresh venv, under `ragmon up`.

Before: on a bare install the faithfulness worker died on `import torch` and the shadow worker on
`import scipy` (declared only for `dev`), five times each in 20 s, and `ragmon up` gave up and
stopped the whole stack. Now the bare stack runs every base worker ready, says faithfulness is off
for want of the `ml` extra (exit status 78, not restarted) and drift runs reduced; with `[ml]` and no
weights faithfulness is off for want of them, a message told apart from the missing extra.

The venvs get packages from the registry or the machine's wheel cache (`make test`'s own install
fills it), pinned by constraints.txt like `make install`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.contracts.extras import EXIT_EXTRA_MISSING

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints.txt"
# The workers `ragmon up` starts by default (phoenix, forwarder and evaluations need a destination configured).
BASE_READY = ("assembler", "drift", "exclusion", "metrics", "probes", "review", "shadow")
EXTRA_LINE = "Faithfulness: off: the 'ml' extra is not installed"


def pip(venv: Path, *args: str, timeout: float = 900) -> None:
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "-c", str(CONSTRAINTS), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    # The same files a release ships: built from a clean copy of the tracked tree (no build/ left here).
    src = tmp_path_factory.mktemp("src")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for rel in filter(None, archive):
        source = ROOT / rel.decode()
        if source.is_file():
            target = src / rel.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (found,) = dist.glob("ragmon-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh virtual environment with the wheel installed and no extra (the ml one is added later)."""
    path = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    pip(path, str(wheel))
    return path


class Up:
    """`ragmon up --no-prometheus` from the venv, its output read line by line; stopped by its PID."""

    def __init__(self, venv: Path, workdir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGMON_", "VIRTUAL_ENV", "PYTHON"))}
        env.update(RAGMON_FREE_PORTS="1", PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
        self.log = workdir / "up.out"
        workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [str(venv / "bin" / "ragmon"), "up", "--no-prometheus", "--workdir", str(workdir)],
            cwd=workdir,
            env=env,
            stdout=open(self.log, "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout_s: float, after: int = 0) -> re.Match[str]:
        """The first match of `pattern` in the log from offset `after` on."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.compile(pattern, re.M).search(self.text(), after)
            if found:
                return found
            assert self.proc.poll() is None, (
                f"ragmon up exited with {self.proc.returncode}:\n{self.text()[-4000:]}"
            )
            time.sleep(0.5)
        raise AssertionError(f"no {pattern!r} within {timeout_s}s:\n{self.text()[-4000:]}")

    def worker_ports(self) -> dict[str, int]:
        self.wait_for(r"^Ctrl-C stops everything", 120)
        return {
            m[1]: int(m[2])
            for m in re.finditer(r"^  worker (\w+)\s+http://127\.0\.0\.1:(\d+)/metrics", self.text(), re.M)
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)  # its own session: `ragmon up` and nothing else
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait_ready(up: Up, ports: dict[str, int], names: tuple[str, ...], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = set(names)
    while waiting and time.monotonic() < deadline:
        waiting = {n for n in waiting if not ready(ports[n])}
        assert up.proc.poll() is None, up.text()[-4000:]
        time.sleep(1)
    assert not waiting, f"not ready after {timeout_s}s: {sorted(waiting)}\n{up.text()[-4000:]}"


@pytest.fixture
def up_bare(venv: Path, tmp_path: Path) -> Iterator[Up]:
    up = Up(venv, tmp_path / "up")
    yield up
    up.stop()


def test_a_bare_install_runs_every_base_worker_and_says_what_is_off(venv: Path, up_bare: Up) -> None:
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True)
    assert probe.returncode != 0, "the bare venv must not have torch"
    ports = up_bare.worker_ports()
    assert set(BASE_READY) | {"faithfulness"} <= set(ports), ports
    wait_ready(up_bare, ports, BASE_READY, 120)
    up_bare.wait_for(
        r"^Faithfulness: off: the 'ml' extra is not installed \(no module torch.*fix: pip install "
        r"'ragmon\[ml\]'$",
        5,
    )
    up_bare.wait_for(r"^Drift: reduced .*pip install 'ragmon\[ml\]'$", 5)
    exited = up_bare.wait_for(
        rf"^worker-faithfulness exited with {EXIT_EXTRA_MISSING}, not a crash, not restarted: ", 60
    )
    # a status line printed after the exit (one printed before it cannot say so yet)
    status = up_bare.wait_for(r"^\d\d:\d\d:\d\d accepted=.*$", 30, after=exited.end())[0]
    assert "| faithfulness off: the 'ml' extra is not installed" in status and "| drift reduced" in status
    for name in BASE_READY:
        assert f" {name}=" in status, status
    text = up_bare.text()
    assert "crash 1 of" not in text and "giving up" not in text and "Traceback" not in text, text[-4000:]
    log = (up_bare.log.parent / "logs" / "worker-faithfulness.log").read_text()
    assert log.count("the 'ml' extra is not installed") == 1, log  # exited once, never restarted


def test_with_the_ml_extra_faithfulness_is_off_for_want_of_weights_not_of_the_extra(
    venv: Path, wheel: Path, tmp_path: Path
) -> None:
    pip(venv, "torch==2.13.0", f"ragmon[ml] @ {wheel.as_uri()}")
    up = Up(venv, tmp_path / "up")
    try:
        ports = up.worker_ports()
        wait_ready(up, ports, BASE_READY, 180)  # drift with its pinned encoder loaded, off the wheel
        up.wait_for(r"^Faithfulness: off: faithfulness\.model: ", 120)
        status = up.wait_for(r"^\d\d:\d\d:\d\d accepted=.*faithfulness off.*$", 30)[0]
        assert "no HHEM weights loaded" in status and "drift reduced" not in status, status
        text = up.text()
        assert EXTRA_LINE not in text and "Drift: reduced" not in text and "exited with" not in text, text[
            -4000:
        ]
        assert not ready(ports["faithfulness"])  # running, not ready: no model
    finally:
        up.stop()
