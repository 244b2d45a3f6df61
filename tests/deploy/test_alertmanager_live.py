"""The real Alertmanager, loaded with deploy/alertmanager.yml, inhibits what the routing tests say and nothing else.

amlint simulates inhibition; this posts the same alerts (labels from the rendered rules and
their promtool firing cases) to a private Alertmanager and reads back which are muted.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.local.embedded import free_port, wait_for_port
from tests.deploy.test_alert_routing import ALERTS, PLAIN
from tests.support.leaks import stop_process
from tests.support.victoriametrics import alertmanager_argv, alertmanager_binary


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = alertmanager_binary()
    port = free_port()
    storage = tmp_path_factory.mktemp("alertmanager")
    log = (Path(storage) / "alertmanager.log").open("wb")
    proc = subprocess.Popen(
        alertmanager_argv(binary, PLAIN, port, storage),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_port("127.0.0.1", port, 30, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)
        log.close()


def _post(base: str, alerts: list[dict[str, str]]) -> None:
    now = datetime.now(UTC)
    body = [
        {"labels": labels, "startsAt": now.isoformat(), "endsAt": (now + timedelta(minutes=10)).isoformat()}
        for labels in alerts
    ]
    httpx.post(f"{base}/api/v2/alerts", json=body, timeout=10).raise_for_status()


def _muted(base: str, expect: dict[str, bool], deadline_s: float = 10) -> dict[str, bool]:
    """alertname -> inhibited, once every expected alert is back (the inhibitor sees sources asynchronously)."""
    end = time.monotonic() + deadline_s
    seen: dict[str, bool] = {}
    while time.monotonic() < end:
        got: list[dict[str, Any]] = httpx.get(f"{base}/api/v2/alerts", timeout=10).json()
        seen = {a["labels"]["alertname"]: bool(a["status"]["inhibitedBy"]) for a in got}
        if seen == expect:
            break
        time.sleep(0.2)
    return seen


@pytest.mark.slow
def test_a_not_ready_faithfulness_worker_mutes_its_lag_and_no_tenant_symptom(alertmanager: str) -> None:
    not_ready = {**ALERTS["RagmonWorkerNotReady"], "worker": "faithfulness", "instance": "faith:9100"}
    own_lag = {**ALERTS["RagmonConsumerLag"], "worker": "faithfulness"}
    others = [{**ALERTS[n], "tenant": "globex"} for n in ("RagmonNoTraffic", "RagmonFalseExclusionNoData")]
    others.append({**ALERTS["RagmonIngestShedding"], "instance": "api:8000"})
    _post(alertmanager, [not_ready, own_lag, *others])
    expect = {
        "RagmonWorkerNotReady": False,
        "RagmonConsumerLag": True,
        "RagmonNoTraffic": False,
        "RagmonFalseExclusionNoData": False,
        "RagmonIngestShedding": False,
    }
    assert _muted(alertmanager, expect) == expect
