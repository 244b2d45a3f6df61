"""A real Phoenix server (`phoenix serve` from .venv-phoenix) for the exporter and forwarder tests.

Phoenix runs from its own virtualenv (tests/phoenix/setup_venv.sh builds it;
its pins conflict with ragmon's), on free ports, with a temporary working
directory (its SQLite database lives there, so a restart keeps the spans and
annotations), bound to 127.0.0.1, with authentication on so the tests go
through Bearer auth like a production Phoenix. It is stopped by its PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from service.local.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
SETUP_SCRIPT = ROOT / "tests" / "phoenix" / "setup_venv.sh"
VENV = ROOT / ".venv-phoenix"
# Phoenix wants secrets of at least 32 characters with a digit and a letter.
PHOENIX_SECRET = "ragmon-test-secret-0123456789-abcdefgh"
ADMIN_SECRET = "ragmon-test-admin-0123456789-abcdefghij"
READY_TIMEOUT_S = 120.0  # ~10 s on a quiet machine; a busy CI machine has taken 50 s


class PhoenixUnavailable(RuntimeError):
    pass


def ensure_venv() -> Path:
    """Build .venv-phoenix if needed (quick no-op when it is current); return the phoenix command."""
    result = subprocess.run(["bash", str(SETUP_SCRIPT)], capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise PhoenixUnavailable(f"tests/phoenix/setup_venv.sh failed:\n{result.stdout}\n{result.stderr}")
    return VENV / "bin" / "phoenix"


@dataclass
class PhoenixServer:
    """One Phoenix process; start() and stop() may be called again (same ports, same database)."""

    log_dir: Path
    working_dir: Path
    http_port: int = field(default_factory=free_port)
    grpc_port: int = field(default_factory=free_port)
    api_key: str = ADMIN_SECRET  # the admin secret works as a Bearer token (Phoenix's system user)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def start(self, command: Path | None = None) -> None:
        command = command or VENV / "bin" / "phoenix"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))},
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.http_port),
            # Phoenix's gRPC receiver binds every interface whatever PHOENIX_HOST says: a free port keeps
            # it from colliding; nothing in the tests sends to it.
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_WORKING_DIR": str(self.working_dir),
            "PHOENIX_ENABLE_AUTH": "true",
            "PHOENIX_SECRET": PHOENIX_SECRET,
            "PHOENIX_ADMIN_SECRET": ADMIN_SECRET,
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"phoenix-{self.http_port}.log", "ab") as log:
            self.proc = subprocess.Popen(
                [str(command), "serve"], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self.wait_ready()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise PhoenixUnavailable(f"phoenix exited with {self.proc.returncode}; see {self.log_dir}")
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise PhoenixUnavailable(
            f"phoenix did not answer /healthz within {timeout_s:.0f}s; see {self.log_dir}"
        )

    def stop(self, timeout_s: float = 15.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
