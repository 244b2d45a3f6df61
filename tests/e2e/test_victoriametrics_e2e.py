"""End to end on the remote_write path: vmagent -> VictoriaMetrics <- vmalert -> Alertmanager.

`ragmon up --no-prometheus` (the metrics and exclusion workers) is scraped by vmagent (1 s), which
remote-writes into a single-node VictoriaMetrics; vmalert evaluates ragmon's rule file, rendered from
this test's config like `ragmon up` renders it (the thumbs-down band in seconds instead of hours), every
second, writes the recorded ragmon:* series back through remote write and sends its alerts to an
Alertmanager loaded with deploy/alertmanager.yml. Flags come from deploy/victoriametrics/*.args.

The simulator's thumbs_down scenario at 3x: acme ships v2 at 300 s (100 s of wall time) and users
dislike 80% of its billing answers. At the release the exclusion worker is frozen (SIGSTOP: it answers
no scrape). Expected: RagmonThumbsDownOutOfBand for acme (guardrail, v2 named in its triage) and
RagmonTargetDown for ragmon-worker-exclusion (pipeline), both in vmalert and in Alertmanager with their
labels; nothing fires before the release (clean traffic), and nothing else fires at all.

VictoriaMetrics runs with -search.latencyOffset=1s (one scrape interval) instead of its default 30 s:
with the default, each evaluation sees the store 30 s late and a guardrail reading a recorded series
60 s late (tests/deploy/test_victoriametrics.py measures it; docs/deploy.md says what it costs).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from service.api.settings import hash_key
from service.local.prometheus import ALERTMANAGER_CONFIG
from service.rules.cli import rendered_text
from service.simulate.delivery import wall_time_at
from tests.e2e.stack import UpStack, start_up, wait_workers_ready
from tests.support.leaks import live_descendants, stop_process
from tests.support.victoriametrics import (
    VmStack,
    binaries,
    start_alertmanager,
    start_victoria_metrics,
    start_vmagent,
    start_vmalert,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
SPEED = 3
RELEASE_S = 300
FROZEN = "exclusion"
KEYS = {"acme": "e2e-vm-acme-key", "globex": "e2e-vm-globex-key"}
CONFIG = {  # the feedback e2e's band (tests/e2e/test_feedback_e2e.py)
    "guardrails": {
        "release_window": "10m",
        "thumbs_down": {
            "window": "30s",
            "baseline_window": "2m",
            "baseline_offset": "30s",
            "min_n": 100,
            "min_baseline_n": 300,
            "for": "20s",
        },
        "regeneration": {
            "window": "30s",
            "baseline_window": "1m",
            "baseline_offset": "30s",
            "min_n": 200,
            "for": "30s",
        },
    }
}


class Watcher(threading.Thread):
    """First time (wall clock) each alert was seen firing in vmalert, with its labels and annotations,
    and each alert Alertmanager held (it forgets an alert once vmalert resolves it)."""

    def __init__(self, vmalert: str, alertmanager: str) -> None:
        super().__init__(daemon=True)
        self.vmalert = vmalert
        self.alertmanager = alertmanager
        self.seen: dict[tuple[str, str], tuple[float, dict[str, str], dict[str, str]]] = {}
        self.routed: dict[tuple[str, str], dict[str, Any]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                got = httpx.get(self.vmalert + "/api/v1/alerts", timeout=5).json()["data"]["alerts"]
                held = httpx.get(self.alertmanager + "/api/v2/alerts", timeout=5).json()
            except (httpx.HTTPError, ValueError, KeyError):
                continue
            for a in got or []:  # vmalert answers null, not [], while nothing is active
                if a["state"] == "firing":
                    self.seen.setdefault(_key(a["labels"]), (time.time(), a["labels"], a["annotations"]))
            for a in held:
                self.routed.setdefault(_key(a["labels"]), a)


def _key(labels: dict[str, str]) -> tuple[str, str]:
    return labels["alertname"], labels.get("tenant") or labels.get("job", "")


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[UpStack, VmStack]]:
    binaries()
    root = tmp_path_factory.mktemp("vm-e2e")
    config = root / "ragmon.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    keys = json.dumps(
        [{"tenant": t, "key_sha256": hash_key(k), "scopes": ["ingest", "label"]} for t, k in KEYS.items()]
    )
    vm = VmStack(root)
    up = start_up(
        root,
        config,
        {"RAGMON_API_KEYS": keys},
        extra_args=("--no-prometheus", "--workers", f"metrics,{FROZEN}"),
    )
    try:
        wait_workers_ready(up)
        targets = {"ragmon-api": up.api_metrics, "ragmon-up": up.supervisor}
        targets |= {f"ragmon-worker-{n}": u for n, u in up.workers.items()}
        scrape = root / "vmagent.yml"
        scrape.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s"},
                    "scrape_configs": [
                        {"job_name": job, "static_configs": [{"targets": [url.removeprefix("http://")]}]}
                        for job, url in targets.items()
                    ],
                }
            )
        )
        rules = root / "ragmon.rules.yml"
        rules.write_text(rendered_text(str(config)))
        vm_url = start_victoria_metrics(vm, latency_offset="1s")
        start_vmagent(vm, scrape, vm_url)
        am = start_alertmanager(vm, ALERTMANAGER_CONFIG)
        start_vmalert(vm, rules, vm_url, am, "1s")
        yield up, vm
    finally:
        for pid in _worker_pids(up):
            os.kill(pid, signal.SIGCONT)  # a stopped process cannot act on the SIGTERM that stops it
        vm.stop()
        up.stop()


def _worker_pids(up: UpStack) -> list[int]:
    """The processes listening on the frozen worker's metrics port (the ones a scrape talks to)."""
    port = up.workers[FROZEN].rsplit(":", 1)[1]
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=10)
    ours = set(live_descendants(up.proc.pid))
    return [int(p) for p in re.findall(r"pid=(\d+)", out.stdout) if int(p) in ours]


def _wait_firing(watcher: Watcher, key: tuple[str, str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while key not in watcher.seen and time.monotonic() < deadline:
        time.sleep(1)


def test_an_incident_fires_its_guardrail_and_pipeline_alert_through_vmalert(
    stacks: tuple[UpStack, VmStack], tmp_path: Path
) -> None:
    up, vm = stacks
    watcher = Watcher(vm.urls["vmalert"], vm.urls["alertmanager"])
    watcher.start()
    manifest_path = tmp_path / "manifest.json"
    env = {**os.environ, "RAGMON_TENANT_KEYS": ",".join(f"{t}={k}" for t, k in KEYS.items())}
    sim = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "simulate", "send", "thumbs_down", "--api", up.api]
        + ["--speed", str(SPEED), "--senders", "2", "--manifest", str(manifest_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        time.sleep(RELEASE_S / SPEED)
        frozen = _worker_pids(up)
        assert frozen, "the exclusion worker's process was not found"
        frozen_at = time.time()
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        out, err = sim.communicate(timeout=400)
    finally:
        if sim.poll() is None:
            stop_process(sim)
    assert sim.returncode == 0, out[-2000:] + err[-2000:]
    # RagmonTargetDown waits 2m (`for:`) after the first failed scrape
    _wait_firing(watcher, ("RagmonTargetDown", f"ragmon-worker-{FROZEN}"), frozen_at + 150 - time.time())
    _wait_firing(watcher, ("RagmonThumbsDownOutOfBand", "acme"), 10)
    time.sleep(3)
    watcher.stop.set()
    pace = json.loads(manifest_path.read_text())["http"]["pace"]
    release_at = wall_time_at(pace["points"], RELEASE_S)
    context = json.dumps(
        {
            "seen_after_release_s": {"/".join(k): round(v[0] - release_at) for k, v in watcher.seen.items()},
            "frozen_after_release_s": round(frozen_at - release_at),
            "alertmanager": [a["labels"] for a in watcher.routed.values()],
            "vmalert_log": vm.log("vmalert")[-1500:],
        }
    )
    assert set(watcher.seen) == {
        ("RagmonThumbsDownOutOfBand", "acme"),
        ("RagmonTargetDown", f"ragmon-worker-{FROZEN}"),
    }, context
    assert min(t for t, _, _ in watcher.seen.values()) >= release_at, context  # clean traffic: nothing
    _, guardrail, annotations = watcher.seen[("RagmonThumbsDownOutOfBand", "acme")]
    assert {k: guardrail.get(k) for k in ("category", "guardrail", "severity", "variant")} == {
        "category": "guardrail",
        "guardrail": "thumbs_down",
        "severity": "ticket",
        "variant": "production",
    }, context
    assert "Release v2" in annotations.get("triage", ""), (annotations, context)
    _, pipeline, _ = watcher.seen[("RagmonTargetDown", f"ragmon-worker-{FROZEN}")]
    assert pipeline.get("category") == "pipeline" and pipeline.get("severity") == "page", context
    # the same alerts reached Alertmanager, labels and triage included (vmalert adds `alertgroup`)
    assert set(watcher.routed) == set(watcher.seen), context
    thumbs = watcher.routed[("RagmonThumbsDownOutOfBand", "acme")]
    assert thumbs["labels"]["guardrail"] == "thumbs_down", context
    assert thumbs["labels"]["alertgroup"] == "ragmon-guardrails", context
    assert "Release v2" in thumbs["annotations"]["triage"], context
    down = watcher.routed[("RagmonTargetDown", f"ragmon-worker-{FROZEN}")]
    assert down["labels"]["category"] == "pipeline", context
