"""Worker processes for tests: started with `python -m workers.NAME`, scraped over HTTP, stopped by PID."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from service.local.embedded import free_port, wait_for_port

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric_sum(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


class WorkerProcess:
    def __init__(
        self, module: str, env: dict[str, str], log_path: Path, argv: list[str] | None = None
    ) -> None:
        self.port = free_port()
        full_env = {
            **os.environ,
            **env,
            "RAGMON_WORKER_METRICS_PORT": str(self.port),
            "PYTHONUNBUFFERED": "1",
        }
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        cmd = argv or [sys.executable, "-m", module]
        self.proc = subprocess.Popen(cmd, env=full_env, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            wait_for_port("127.0.0.1", self.port, 60, self.proc)
        except BaseException:
            self.stop()  # the caller never gets the object, so it could not stop it
            raise
        self.last_samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def scrape(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        self.last_samples = parse_metrics(httpx.get(self.url + "/metrics", timeout=5).text)
        return self.last_samples

    def total(self, name: str, **labels: str) -> float:
        return metric_sum(self.scrape(), name, **labels)

    def ready(self) -> bool:
        try:
            return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def terminate(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self._log.close()
        return code

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if not self._log.closed:
            self._log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_ready(worker: WorkerProcess, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker.proc.poll() is not None:
            raise AssertionError(f"worker exited with {worker.proc.returncode}:\n{worker.log_text()[-3000:]}")
        if worker.ready():
            return
        time.sleep(0.1)
    raise AssertionError(f"worker not ready in {timeout_s}s:\n{worker.log_text()[-3000:]}")


ROOT = Path(__file__).resolve().parents[2]


def worker_env(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, config: Path | None = None, **extra: str
) -> dict[str, str]:
    """The environment of a worker process talking to the test session's broker and Redis."""
    env = {
        "RAGMON_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGMON_REDIS_URL": redis_url,
        "RAGMON_KAFKA_TOPIC_PREFIX": topic_prefix,
        "RAGMON_KAFKA_PARTITIONS": "4",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        **extra,
    }
    if config is not None:
        env["RAGMON_CONFIG"] = str(config)
    return env
