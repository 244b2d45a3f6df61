"""End to end: thumbs-down rising on one intent after a release pages through Prometheus and through
VictoriaMetrics alike, from one run of traffic.

`ragmon up` (the metrics and exclusion workers, Prometheus: 1 s scrape and evaluation, rules rendered from
this test's config: the thumbs-down band in seconds instead of hours) receives the simulator's thumbs_down
scenario at 3x: acme ships v2 at 300 s (100 s of wall time) and users dislike 80% of its billing answers.

Beside ragmon's own Prometheus, the remote_write path watches the same processes: vmagent scrapes every
target (1 s) and remote-writes into a single-node VictoriaMetrics; vmalert evaluates the same rendered
rule file every second, writes the recorded ragmon:* series back through remote write and sends its
alerts to an Alertmanager loaded with deploy/alertmanager.yml (flags from deploy/victoriametrics/*.args).
vmalert reads VictoriaMetrics only: nothing of Prometheus reaches it.

At the release the exclusion worker is frozen (SIGSTOP: it answers no scrape). Expected:
- Prometheus: RagmonThumbsDownOutOfBand for acme only, with the release named in its triage; the clean
  tenant and the clean phase fire no guardrail.
- vmalert and its Alertmanager: RagmonThumbsDownOutOfBand for acme (guardrail, v2 named in its triage)
  and RagmonTargetDown for ragmon-worker-exclusion (pipeline), with their labels; nothing before the
  release, and nothing else at all.

VictoriaMetrics runs with -search.latencyOffset=1s (one scrape interval) instead of its default 30 s:
with the default, each evaluation sees the store 30 s late and a guardrail reading a recorded series
60 s late (tests/deploy/test_victoriametrics.py measures it; docs/deploy.md says what it costs).

The two evaluators share one run (one stack, one scenario played once): the run is the test's cost.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from service.local.prometheus import ALERTMANAGER_CONFIG
from service.rules.cli import rendered_text
from service.simulate.delivery import wall_time_at
from tests.e2e.stack import (
    AlertWatcher,
    UpStack,
    api_keys,
    firing_starts,
    simulator_argv,
    start_up,
    wait_workers_ready,
    with_tenant_keys,
)
from tests.support.leaks import live_descendants, stop_process
from tests.support.victoriametrics import (
    VmStack,
    binaries,
    start_alertmanager,
    start_victoria_metrics,
    start_vmagent,
    start_vmalert,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
SPEED = 3
RELEASE_S = 300  # the scenario second at which acme ships v2 and the incident starts
FROZEN = "exclusion"
KEYS = {"acme": "e2e-thumbs-acme-key", "globex": "e2e-thumbs-globex-key"}
CONFIG = {
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


class VmWatcher(threading.Thread):
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


@dataclass
class Run:
    up: UpStack
    vm: VmStack
    started: float
    finished: float
    release_at: float
    frozen_at: float
    pace: dict[str, Any]
    prometheus_seen: dict[str, dict[str, str]]
    vm_watcher: VmWatcher


def _start_vm(root: Path, up: UpStack, config: Path) -> VmStack:
    vm = VmStack(root)
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
    try:
        vm_url = start_victoria_metrics(vm, latency_offset="1s")
        start_vmagent(vm, scrape, vm_url)
        am = start_alertmanager(vm, ALERTMANAGER_CONFIG)
        start_vmalert(vm, rules, vm_url, am, "1s")
    except BaseException:
        vm.stop()
        raise
    return vm


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    binaries()
    root = tmp_path_factory.mktemp("thumbs-e2e")
    config = root / "ragmon.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    keys = api_keys(KEYS)
    up = start_up(root, config, {"RAGMON_API_KEYS": keys}, extra_args=("--workers", f"metrics,{FROZEN}"))
    vm: VmStack | None = None
    try:
        wait_workers_ready(up)
        vm = _start_vm(root, up, config)
        yield _play(up, vm, root / "manifest.json")
    finally:
        for pid in _worker_pids(up):
            os.kill(pid, signal.SIGCONT)  # a stopped process cannot act on the SIGTERM that stops it
        if vm is not None:
            vm.stop()
        up.stop()


def _play(up: UpStack, vm: VmStack, manifest_path: Path) -> Run:
    prometheus = AlertWatcher(up.prometheus)
    vm_watcher = VmWatcher(vm.urls["vmalert"], vm.urls["alertmanager"])
    prometheus.start()
    vm_watcher.start()
    started = time.time()
    sim = subprocess.Popen(
        simulator_argv(
            "thumbs_down",
            up.api,
            *("--speed", str(SPEED), "--senders", "2", "--manifest", str(manifest_path)),
        ),
        env=with_tenant_keys(KEYS),
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
    _wait_firing(vm_watcher, ("RagmonTargetDown", f"ragmon-worker-{FROZEN}"), frozen_at + 150 - time.time())
    _wait_firing(vm_watcher, ("RagmonThumbsDownOutOfBand", "acme"), 10)
    time.sleep(3)  # the last evaluation lands
    prometheus.stop.set()
    vm_watcher.stop.set()
    pace = json.loads(manifest_path.read_text())["http"]["pace"]
    release_at = wall_time_at(pace["points"], RELEASE_S)
    return Run(up, vm, started, time.time(), release_at, frozen_at, pace, prometheus.seen, vm_watcher)


def _worker_pids(up: UpStack) -> list[int]:
    """The processes listening on the frozen worker's metrics port (the ones a scrape talks to)."""
    port = up.workers[FROZEN].rsplit(":", 1)[1]
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=10)
    ours = set(live_descendants(up.proc.pid))
    return [int(p) for p in re.findall(r"pid=(\d+)", out.stdout) if int(p) in ours]


def _wait_firing(watcher: VmWatcher, key: tuple[str, str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while key not in watcher.seen and time.monotonic() < deadline:
        time.sleep(1)


def test_rising_thumbs_down_fires_its_alert_for_that_tenant_only(run: Run) -> None:
    starts = firing_starts(run.up, run.started, run.finished)
    band = {
        name: run.up.prom(
            "/api/v1/query_range", query=name, start=run.release_at - 30, end=run.finished, step="10s"
        )["result"]
        for name in (
            "ragmon:thumbs_down:rate",
            "ragmon:thumbs_down:baseline_rate",
            "ragmon:thumbs_down:band_half_width",
        )
    }
    context = json.dumps(
        {
            "starts_after_release_s": [
                (round(ts - run.release_at), n, m.get("tenant")) for ts, n, m in starts
            ],
            "sender_max_late_s": run.pace["max_late_s"],
            "band": {
                name: {r["metric"].get("tenant"): [round(float(v), 3) for _, v in r["values"]] for r in rows}
                for name, rows in band.items()
            },
        }
    )
    # Only acme's thumbs-down alert fires: no other guardrail, not the clean tenant, not before v2.
    assert {(n, m.get("tenant")) for _, n, m in starts} == {("RagmonThumbsDownOutOfBand", "acme")}, context
    assert min(ts for ts, _, _ in starts) >= run.release_at, context
    triage = run.prometheus_seen.get("RagmonThumbsDownOutOfBand/acme", {}).get("triage", "")
    assert "Release v2" in triage, (triage, context)


def test_an_incident_fires_its_guardrail_and_pipeline_alert_through_vmalert(run: Run) -> None:
    seen, routed = run.vm_watcher.seen, run.vm_watcher.routed
    context = json.dumps(
        {
            "seen_after_release_s": {"/".join(k): round(v[0] - run.release_at) for k, v in seen.items()},
            "frozen_after_release_s": round(run.frozen_at - run.release_at),
            "alertmanager": [a["labels"] for a in routed.values()],
            "vmalert_log": run.vm.log("vmalert")[-1500:],
        }
    )
    assert set(seen) == {
        ("RagmonThumbsDownOutOfBand", "acme"),
        ("RagmonTargetDown", f"ragmon-worker-{FROZEN}"),
    }, context
    assert min(t for t, _, _ in seen.values()) >= run.release_at, context  # clean traffic: nothing
    _, guardrail, annotations = seen[("RagmonThumbsDownOutOfBand", "acme")]
    assert {k: guardrail.get(k) for k in ("category", "guardrail", "severity", "variant")} == {
        "category": "guardrail",
        "guardrail": "thumbs_down",
        "severity": "ticket",
        "variant": "production",
    }, context
    assert "Release v2" in annotations.get("triage", ""), (annotations, context)
    _, pipeline, _ = seen[("RagmonTargetDown", f"ragmon-worker-{FROZEN}")]
    assert pipeline.get("category") == "pipeline" and pipeline.get("severity") == "page", context
    # the same alerts reached Alertmanager, labels and triage included (vmalert adds `alertgroup`)
    assert set(routed) == set(seen), context
    thumbs = routed[("RagmonThumbsDownOutOfBand", "acme")]
    assert thumbs["labels"]["guardrail"] == "thumbs_down", context
    assert thumbs["labels"]["alertgroup"] == "ragmon-guardrails", context
    assert "Release v2" in thumbs["annotations"]["triage"], context
    down = routed[("RagmonTargetDown", f"ragmon-worker-{FROZEN}")]
    assert down["labels"]["category"] == "pipeline", context
