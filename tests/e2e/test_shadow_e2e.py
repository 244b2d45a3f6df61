"""End to end: a slower candidate through `ragmon up` raises RagmonShadowCandidateWorse, a ticket, and
nothing pages.

`ragmon up` with the metrics and shadow workers and Prometheus (1 s scrape and
evaluation, rules rendered from this test's config) receives the simulator's
shadow_slower scenario (every request shadowed by a candidate 30% slower) at
5x speed through the API.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import yaml

from tests.e2e.stack import UpStack, api_keys, simulate_send, start_up, wait_workers_ready

pytestmark = pytest.mark.slow
KEY = "e2e-shadow-acme-key"
CONFIG = {
    "shadow": {
        "recompute_every_s": 2,
        "recompute_every_pairs": 100,
        "expected_shadow_rate": {"cand-slower": 1.0},
    },
    "guardrails": {"shadow": {"for": "5s"}},
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpStack]:
    root = tmp_path_factory.mktemp("shadow-e2e")
    config = root / "ragmon.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    keys = api_keys({"acme": KEY})
    up = start_up(root, config, {"RAGMON_API_KEYS": keys}, extra_args=("--workers", "metrics,shadow"))
    try:
        wait_workers_ready(up)
        yield up
    finally:
        up.stop()


def _firing(stack: UpStack, alertname: str) -> list[dict[str, str]]:
    return [r["metric"] for r in stack.query(f'ALERTS{{alertname="{alertname}", alertstate="firing"}}')]


def test_a_slower_candidate_is_a_ticket_and_nothing_pages(stack: UpStack) -> None:
    started = time.time()
    sim = simulate_send("shadow_slower", stack.api, {"acme": KEY}, "--speed", "5", timeout=180)
    assert sim.returncode == 0, sim.stdout[-2000:] + sim.stderr[-2000:]
    deadline = time.monotonic() + 60
    while not (alerts := _firing(stack, "RagmonShadowCandidateWorse")) and time.monotonic() < deadline:
        time.sleep(1)
    assert alerts, "RagmonShadowCandidateWorse did not fire: " + json.dumps(
        stack.query('ragmon_shadow_verdict{metric="latency_total_seconds"} == 1')
    )
    labels = {(a["candidate"], a["metric"], a["severity"], a["category"]) for a in alerts}
    assert ("cand-slower", "latency_total_seconds", "ticket", "candidate") in labels
    assert all(a["severity"] == "ticket" for a in alerts)
    pages = stack.prom(
        "/api/v1/query_range", query='ALERTS{severity="page"}', start=started, end=time.time(), step="1s"
    )["result"]
    assert pages == [], [p["metric"] for p in pages]
    pairs = stack.query('max by (candidate) (ragmon_shadow_window_pairs{tenant="acme"})')
    assert float(pairs[0]["value"][1]) >= 100
    # every request is shadowed, as configured: once the twins in flight arrived, the coverage is consistent
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        coverage = {
            r["metric"]["__name__"]: float(r["value"][1])
            for r in stack.query(
                '{__name__=~"ragmon_shadow_(coverage_ratio|expected_coverage_ratio|coverage_mismatch_detected)",'
                'candidate="cand-slower"}'
            )
        }
        if coverage.get("ragmon_shadow_coverage_mismatch_detected") == 0.0:
            break
        time.sleep(1)
    assert coverage.get("ragmon_shadow_expected_coverage_ratio") == 1.0, coverage
    assert coverage.get("ragmon_shadow_coverage_mismatch_detected") == 0.0, coverage
    assert coverage["ragmon_shadow_coverage_ratio"] == 1.0, coverage
