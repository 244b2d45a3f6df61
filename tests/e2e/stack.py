"""`ragmon up` as a test fixture: start it, read where everything listens, stop it by PID."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from service.api.settings import hash_key
from tests.support.leaks import live_descendants, stop_pids
from tests.support.tools import SETUP_COMMAND


@dataclass
class UpStack:
    proc: subprocess.Popen[bytes]
    log: Path
    api: str = ""
    prometheus: str = ""  # empty with --no-prometheus
    api_metrics: str = ""
    supervisor: str = ""
    workers: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        """Ctrl-C to `ragmon up` (it stops its children); if it hangs, it and every child by PID."""
        children = live_descendants(self.proc.pid)  # each runs in its own session: killpg misses them
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                children = live_descendants(self.proc.pid) or children
                self.proc.kill()
                self.proc.wait(10)
        # Still ours (pytest is their subreaper once `up` is gone): a recycled PID is never signalled.
        ours = set(live_descendants(os.getpid()))
        stop_pids([p for p in children if p in ours])

    def prom(self, path: str, **params: Any) -> Any:
        r = httpx.get(self.prometheus + path, params=params, timeout=30)
        r.raise_for_status()
        return r.json()["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = at
        return list(self.prom("/api/v1/query", **params)["result"])


def start_up(
    workdir: Path, config: Path, env: dict[str, str], timeout_s: float = 180, extra_args: tuple[str, ...] = ()
) -> UpStack:
    log = workdir / "ragmon-up.out"
    workdir.mkdir(parents=True, exist_ok=True)
    out = open(log, "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.cli",
            "up",
            "--config",
            str(config),
            "--workdir",
            str(workdir / "up"),
            "--scrape-interval",
            "1s",
            *extra_args,
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    stack = UpStack(proc, log)
    try:
        _read_summary(stack, timeout_s, prometheus="--no-prometheus" not in extra_args)
    except BaseException:
        stack.stop()  # every failure after the start: nothing of the stack outlives the fixture
        raise
    return stack


def _read_summary(stack: UpStack, timeout_s: float, prometheus: bool = True) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = stack.log.read_text(errors="replace")
        if stack.proc.poll() is not None:
            raise AssertionError(f"ragmon up exited with {stack.proc.returncode}:\n{text[-4000:]}")
        if "Ctrl-C stops everything" in text:
            stack.api = _printed(r"API\s+(http://\S+)", text, "no API URL")
            stack.api_metrics = _printed(r"API metrics\s+(http://\S+)/metrics", text, "no API metrics URL")
            stack.supervisor = _printed(r"supervisor\s+(http://\S+)/metrics", text, "no supervisor URL")
            if prometheus:
                stack.prometheus = _printed(
                    r"Prometheus\s+(http://\S+)",
                    text,
                    f"no Prometheus URL (`{SETUP_COMMAND}` installs Prometheus)",
                )
            stack.workers = dict(re.findall(r"worker (\w+)\s+(http://\S+)/metrics", text))
            return
        time.sleep(0.5)
    raise AssertionError(
        f"ragmon up not up in {timeout_s}s:\n{stack.log.read_text(errors='replace')[-4000:]}"
    )


def _printed(pattern: str, text: str, what: str) -> str:
    found = re.search(pattern, text)
    if found is None:
        raise AssertionError(f"ragmon up printed {what}:\n{text[-2000:]}")
    return found.group(1)


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


def api_keys(keys: dict[str, str]) -> str:
    """RAGMON_API_KEYS for the tenants' keys, each with the ingest and label scopes (the simulator sends
    offline gold labels too)."""
    return json.dumps(
        [{"tenant": t, "key_sha256": hash_key(k), "scopes": ["ingest", "label"]} for t, k in keys.items()]
    )


def simulator_argv(scenario: str, api: str, *args: str) -> list[str]:
    """`ragmon simulate send SCENARIO` against the stack's API, with the further options `args`."""
    return [sys.executable, "-m", "service.cli", "simulate", "send", scenario, "--api", api, *args]


def with_tenant_keys(keys: dict[str, str]) -> dict[str, str]:
    """This process's environment and the tenants' API keys, as the simulator reads them."""
    return {**os.environ, "RAGMON_TENANT_KEYS": ",".join(f"{t}={k}" for t, k in keys.items())}


def simulate_send(
    scenario: str, api: str, keys: dict[str, str], *args: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Play a scenario to its end (the caller asserts on the return code and the output)."""
    return subprocess.run(
        simulator_argv(scenario, api, *args),
        env=with_tenant_keys(keys),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class AlertWatcher(threading.Thread):
    """Keeps the annotations of every alert seen firing (ALERTS series carry no annotations)."""

    def __init__(self, prometheus: str) -> None:
        super().__init__(daemon=True)
        self.prometheus = prometheus
        self.seen: dict[str, dict[str, str]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                alerts = httpx.get(self.prometheus + "/api/v1/alerts", timeout=5).json()["data"]["alerts"]
            except (httpx.HTTPError, ValueError, KeyError):
                continue
            for a in alerts:
                if a["state"] == "firing":
                    self.seen.setdefault(
                        a["labels"]["alertname"] + "/" + a["labels"].get("tenant", ""), a["annotations"]
                    )


def firing_starts(
    stack: UpStack, start: float, end: float, category: str = "guardrail"
) -> list[tuple[float, str, dict[str, str]]]:
    """(start time, alertname, labels) of every contiguous firing run of an alert of `category`."""
    result = stack.prom(
        "/api/v1/query_range",
        query=f'ALERTS{{alertstate="firing", category="{category}"}}',
        start=start,
        end=end,
        step="1s",
    )["result"]
    starts = []
    for series in result:
        previous = None
        for ts, _ in series["values"]:
            if previous is None or float(ts) - previous > 1.5:
                starts.append((float(ts), series["metric"]["alertname"], series["metric"]))
            previous = float(ts)
    return sorted(starts, key=lambda s: (s[0], s[1]))
