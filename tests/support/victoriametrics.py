"""VictoriaMetrics, vmagent and vmalert (Debian's victoria-metrics package) on free ports, stopped by PID.

The flags come from the deploy example (deploy/victoriametrics/*.args, one flag per line, `{name}`
filled in here), so the test stack runs what the docs tell an operator to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from service.local.embedded import free_port, wait_for_port
from tests.support.leaks import stop_process

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "victoriametrics"
BINARIES = ("victoria-metrics", "vmagent", "vmalert")


def binaries() -> dict[str, str]:
    """name -> path; fails in CI (host.sh installs the package), skips elsewhere."""
    found = {name: shutil.which(name) for name in BINARIES}
    absent = [n for n, p in found.items() if p is None]
    if absent:
        if os.environ.get("CI"):
            pytest.fail(f"{absent} missing in CI: deploy/setup/host.sh test installs victoria-metrics")
        pytest.skip(f"{absent} not installed (apt-get install victoria-metrics)")
    return {n: p for n, p in found.items() if p is not None}


def example_args(name: str, **values: str) -> list[str]:
    """The flags of deploy/victoriametrics/<name>.args with their `{placeholders}` filled in."""
    lines = (EXAMPLE / f"{name}.args").read_text().splitlines()
    return [line.strip().format(**values) for line in lines if line.strip() and not line.startswith("#")]


@dataclass
class VmStack:
    """The processes started, in start order; `stop()` stops them in reverse, by PID."""

    workdir: Path
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    urls: dict[str, str] = field(default_factory=dict)

    def start(self, name: str, argv: list[str], port: int) -> str:
        log = (self.workdir / f"{name}.log").open("wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs.append((name, proc))
        wait_for_port("127.0.0.1", port, 30, proc)
        self.urls[name] = f"http://127.0.0.1:{port}"
        return self.urls[name]

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            stop_process(proc)
        self.procs.clear()

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")[-3000:]


def start_victoria_metrics(stack: VmStack, latency_offset: str = "30s") -> str:
    port = free_port()
    argv = [binaries()["victoria-metrics"]] + example_args(
        "victoria-metrics",
        data=str(stack.workdir / "vm-data"),
        listen=f"127.0.0.1:{port}",
        latency_offset=latency_offset,
    )
    url = stack.start("victoria-metrics", argv, port)
    wait_http(url + "/health")
    return url


def start_vmagent(stack: VmStack, scrape_config: Path, vm: str) -> str:
    port = free_port()
    argv = [binaries()["vmagent"]] + example_args(
        "vmagent",
        scrape_config=str(scrape_config),
        vm=vm,
        data=str(stack.workdir / "vmagent-data"),
        listen=f"127.0.0.1:{port}",
    )
    return stack.start("vmagent", argv, port)


def start_vmalert(stack: VmStack, rules: Path, vm: str, alertmanager: str, interval: str) -> str:
    port = free_port()
    argv = [binaries()["vmalert"]] + example_args(
        "vmalert",
        rules=str(rules),
        vm=vm,
        alertmanager=alertmanager,
        interval=interval,
        listen=f"127.0.0.1:{port}",
    )
    return stack.start("vmalert", argv, port)


def alertmanager_binary() -> str:
    """The installed Alertmanager; the test is skipped without one (failed in CI, which installs it)."""
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("alertmanager missing in CI: .ci/run installs prometheus-alertmanager")
        pytest.skip("alertmanager not installed (apt-get install prometheus-alertmanager)")
    return binary


def alertmanager_argv(binary: str, config: Path, port: int, storage: Path) -> list[str]:
    """A lone Alertmanager (no cluster) on 127.0.0.1:`port`."""
    return [
        binary,
        f"--config.file={config}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.path={storage}",
        "--cluster.listen-address=",
    ]


def start_alertmanager(stack: VmStack, config: Path) -> str:
    binary = alertmanager_binary()
    port = free_port()
    return stack.start(
        "alertmanager", alertmanager_argv(binary, config, port, stack.workdir / "alertmanager"), port
    )


def wait_http(url: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} not answering 200 in {timeout_s}s")
