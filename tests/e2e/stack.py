"""`ragmon up` as a test fixture: start it, read where everything listens, stop it by PID."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx


@dataclass
class UpStack:
    proc: subprocess.Popen[bytes]
    log: Path
    api: str = ""
    prometheus: str = ""
    workers: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def prom(self, path: str, **params: Any) -> Any:
        r = httpx.get(self.prometheus + path, params=params, timeout=30)
        r.raise_for_status()
        return r.json()["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = at
        return list(self.prom("/api/v1/query", **params)["result"])


def start_up(workdir: Path, config: Path, env: dict[str, str], timeout_s: float = 180,
             extra_args: tuple[str, ...] = ()) -> UpStack:
    log = workdir / "ragmon-up.out"
    workdir.mkdir(parents=True, exist_ok=True)
    out = open(log, "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "up", "--config", str(config), "--workdir", str(workdir / "up"),
         "--scrape-interval", "1s", *extra_args],
        stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
        start_new_session=True)
    stack = UpStack(proc, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if proc.poll() is not None:
            raise AssertionError(f"ragmon up exited with {proc.returncode}:\n{text[-4000:]}")
        if "Ctrl-C stops everything" in text:
            stack.api = re.search(r"API\s+(http://\S+)", text).group(1)  # type: ignore[union-attr]
            stack.prometheus = re.search(r"Prometheus\s+(http://\S+)", text).group(1)  # type: ignore[union-attr]
            stack.workers = dict(re.findall(r"worker (\w+)\s+(http://\S+)/metrics", text))
            return stack
        time.sleep(0.5)
    stack.stop()
    raise AssertionError(f"ragmon up not up in {timeout_s}s:\n{log.read_text(errors='replace')[-4000:]}")


def wait_workers_ready(stack: UpStack, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    pending = dict(stack.workers)
    while pending and time.monotonic() < deadline:
        for name, url in list(pending.items()):
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    del pending[name]
            except httpx.HTTPError:
                pass
        time.sleep(0.5)
    if pending:
        details = {n: httpx.get(u + "/readyz", timeout=2).text for n, u in pending.items()}
        raise AssertionError(f"workers not ready in {timeout_s}s: {details}")
