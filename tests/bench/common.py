"""Shared pieces of the benchmarks: servers, an HTTP load client, numbers, reports.

Benchmarks are scripts, not tests: `make bench` runs them and each writes a
Markdown report under tests/bench/reports/. Machines here are noisy, so every
number is a median over repetitions and each target is also reported as a
ratio against a reference measured in the same run.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "tests" / "bench" / "reports"


def peak_rss_mb(pid: int) -> float:
    """VmHWM of a running process: its peak resident set size."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[idx]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine_line() -> str:
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}"
    )


def write_report(name: str, title: str, body: str, out: str | None = None) -> Path:
    path = Path(out) if out else REPORTS / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n_Machine: {machine_line()}._\n\n{body.rstrip()}\n")
    print(path.read_text())
    return path


def print_report(text: str, out: Path | None) -> None:
    """Print a report made whole by the bench itself and, given --out, write it there too."""
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


def child_report(
    argv: list[str], tree: Path, env: dict[str, str], timeout: float, what: str
) -> dict[str, Any]:
    """Run a bench child in `tree` to its end: its JSON report, the last line it prints. Fails naming `what`."""
    done = subprocess.run(
        argv, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} run in {tree} failed: {done.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def spawn(
    argv: list[str], env: dict[str, str], log: Path, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "ab")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)


def ragmon_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "service.cli", *args]


@dataclass
class LoadResult:
    latencies_s: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    events_ok: int = 0
    elapsed_s: float = 0.0
    events_all: int = 0  # answered ok_status, warm-up included (to divide a process's CPU time over the run)

    @property
    def events_per_s(self) -> float:
        return self.events_ok / self.elapsed_s if self.elapsed_s else 0.0


async def read_response(reader: asyncio.StreamReader) -> int:
    """Read one HTTP/1.1 response (status line, headers, a Content-Length body); return its status."""
    status = int((await reader.readline()).split()[1])
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return status


async def _client(
    host: str,
    port: int,
    requests: list[bytes],
    events_per_request: int,
    until: float,
    measure_from: float,
    result: LoadResult,
    offset: int,
    ok_status: int = 202,
) -> None:
    """A minimal HTTP/1.1 keep-alive client: pre-built requests, so the client costs little CPU."""
    reader, writer = await asyncio.open_connection(host, port)
    i = offset
    try:
        while time.monotonic() < until:
            started = time.monotonic()
            writer.write(requests[i % len(requests)])
            i += 1
            status = await read_response(reader)
            if status == ok_status:
                result.events_all += events_per_request
            if started >= measure_from:
                result.latencies_s.append(time.monotonic() - started)
                result.statuses[status] = result.statuses.get(status, 0) + 1
                if status == ok_status:
                    result.events_ok += events_per_request
    finally:
        writer.close()


def build_request(host: str, port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}:{port}",
        f"Content-Length: {len(body)}",
        "Connection: keep-alive",
        *[f"{k}: {v}" for k, v in headers.items()],
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def run_load(
    host: str,
    port: int,
    requests: list[bytes],
    events_per_request: int,
    clients: int,
    warmup_s: float,
    measure_s: float,
    ok_status: int = 202,
) -> LoadResult:
    """Keep-alive load; `events_per_request` are counted for each answer with `ok_status` (202 native, 200 OTLP)."""
    result = LoadResult()

    async def main() -> None:
        now = time.monotonic()
        measure_from = now + warmup_s
        until = measure_from + measure_s
        await asyncio.gather(
            *[
                _client(
                    host, port, requests, events_per_request, until, measure_from, result, k * 7, ok_status
                )
                for k in range(clients)
            ]
        )

    asyncio.run(main())
    result.elapsed_s = measure_s
    return result
