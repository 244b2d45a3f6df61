"""End to end: answers citing documents that were never retrieved (after a release) fire
RagmonAnswerCheckFailing{check="citations_known"} for that tenant, with the release named in its triage;
no other check fails over its limit on the simulator's clean answers, the clean tenant and the clean
phase fire no guardrail.

`ragmon up` with the metrics worker (which runs the deterministic checks) and Prometheus (1 s scrape and
evaluation, rules rendered from this test's config: the check window in seconds instead of 30m) receives
the simulator's checks scenario at 3x: acme ships v2 at 300 s and 40% of its answers cite a phantom.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from service.api.settings import hash_key
from service.simulate.delivery import wall_time_at
from tests.e2e.stack import AlertWatcher, UpStack, firing_starts, start_up, wait_workers_ready

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
SPEED = 3
RELEASE_S = 300  # the scenario second at which acme ships v2 and the phantom citations start
KEYS = {"acme": "e2e-checks-acme-key", "globex": "e2e-checks-globex-key"}
CONFIG = {
    "guardrails": {"release_window": "10m", "checks": {"window": "30s", "min_checked": 100, "for": "10s"}}
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpStack]:
    root = tmp_path_factory.mktemp("checks-e2e")
    config = root / "ragmon.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    keys = json.dumps(
        [{"tenant": t, "key_sha256": hash_key(k), "scopes": ["ingest", "label"]} for t, k in KEYS.items()]
    )
    up = start_up(root, config, {"RAGMON_API_KEYS": keys}, extra_args=("--workers", "metrics"))
    try:
        wait_workers_ready(up)
        yield up
    finally:
        up.stop()


def test_phantom_citations_fire_the_citation_check_alert_only(stack: UpStack, tmp_path: Path) -> None:
    watcher = AlertWatcher(stack.prometheus)
    watcher.start()
    started = time.time()
    manifest_path = tmp_path / "manifest.json"
    env = {**os.environ, "RAGMON_TENANT_KEYS": ",".join(f"{t}={k}" for t, k in KEYS.items())}
    sim = subprocess.run(
        [sys.executable, "-m", "service.cli", "simulate", "send", "checks", "--api", stack.api]
        + ["--speed", str(SPEED), "--senders", "2", "--manifest", str(manifest_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    time.sleep(3)  # the last evaluation lands
    watcher.stop.set()
    assert sim.returncode == 0, sim.stdout[-2000:] + sim.stderr[-2000:]
    pace = json.loads(manifest_path.read_text())["http"]["pace"]
    release_at = wall_time_at(pace["points"], RELEASE_S)
    starts = firing_starts(stack, started, time.time())
    band = {
        name: stack.prom(
            "/api/v1/query_range", query=name, start=release_at - 30, end=time.time(), step="10s"
        )["result"]
        for name in ("ragmon:check:rate", "ragmon:check:trials")
    }
    context = json.dumps(
        {
            "starts_after_release_s": [
                (round(ts - release_at), n, m.get("tenant"), m.get("check")) for ts, n, m in starts
            ],
            "sender_max_late_s": pace["max_late_s"],
            "band": {
                name: {
                    f"{r['metric'].get('tenant')}/{r['metric'].get('check')}": [
                        round(float(v), 3) for _, v in r["values"]
                    ]
                    for r in rows
                    if r["metric"].get("variant") == "production"
                }
                for name, rows in band.items()
            },
        }
    )
    # Only acme's citation check fires: no other check, guardrail or tenant, not before v2.
    fired = {(n, m.get("tenant"), m.get("check")) for _, n, m in starts}
    assert fired == {("RagmonAnswerCheckFailing", "acme", "citations_known")}, context
    assert min(ts for ts, _, _ in starts) >= release_at, context
    triage = watcher.seen.get("RagmonAnswerCheckFailing/acme", {}).get("triage", "")
    assert "Release v2" in triage, (triage, context)
    # the checks ran on every answered trace: the clean tenant's citations all pass
    clean = stack.query('ragmon:check:rate{tenant="globex", variant="production", check="citations_known"}')
    assert clean and all(float(r["value"][1]) == 0.0 for r in clean), clean
