"""Every dashboard query returns data from a real Prometheus that scraped every metric the code defines.

Synthetic traffic (tests/dashboards/synthetic.py) gives each metric a series with
the dashboards' tenant and variant; Prometheus loads the project's recording and
alert rules. A query that joins series on mismatched labels, or reads a metric
under a label value no worker writes, comes back empty and fails here. The
end-to-end test does the same against a simulator run.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry, start_http_server

from dashboards.generate import build_all
from dashboards.queries import PanelQuery, all_panel_queries, needs_history
from service.local.embedded import free_port, wait_for_port
from tests.dashboards.catalog import RULES, all_metrics
from tests.dashboards.synthetic import SyntheticTraffic
from tests.support.leaks import stop_process
from tests.support.tools import require_tool

pytestmark = pytest.mark.slow
QUERIES = all_panel_queries("acme", "production", rate_interval="10s", interval="1s", range_="1m")


def _prometheus_config(exporter_port: int) -> dict[str, object]:
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {"job_name": "ragmon-synthetic", "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}]}
        ],
    }


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = require_tool("prometheus")
    work: Path = tmp_path_factory.mktemp("prometheus")
    registry = CollectorRegistry()
    traffic = SyntheticTraffic(all_metrics(registry))
    exporter_port, port = free_port(), free_port()
    server, _ = start_http_server(exporter_port, addr="127.0.0.1", registry=traffic.scraped(registry))
    (work / "prometheus.yml").write_text(yaml.safe_dump(_prometheus_config(exporter_port)))
    argv = [
        binary,
        f"--config.file={work / 'prometheus.yml'}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.path={work / 'data'}",
    ]
    with traffic, open(work / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port("127.0.0.1", port, 30, proc)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(proc)
            server.shutdown()


def _results(url: str, query: PanelQuery) -> list[dict[str, Any]]:
    body = httpx.get(f"{url}/api/v1/query", params={"query": query.expr}, timeout=10).json()
    assert body["status"] == "success", (query, body)
    results: list[dict[str, Any]] = body["data"]["result"]
    return results


def _empty(url: str, queries: list[PanelQuery]) -> list[PanelQuery]:
    return [q for q in queries if not _results(url, q)]


def test_every_panel_query_returns_data(prometheus: str) -> None:
    current = [q for q in QUERIES if not needs_history(q)]
    assert len(current) > 0.9 * len(QUERIES)
    deadline = time.monotonic() + 45
    empty = _empty(prometheus, current)
    while empty and time.monotonic() < deadline:
        time.sleep(1)
        empty = _empty(prometheus, empty)
    assert not empty, "\n".join(f"{q.dashboard_uid} / {q.panel_title}: {q.expr}" for q in empty)


def test_shares_are_between_0_and_1(prometheus: str) -> None:
    """Every counter grows by one per tick and child, so a share computed right reads 0 or 1; one that
    divides the wrong operand (operator precedence, a join on the wrong labels) reads otherwise."""
    units = {
        (b["uid"], p["title"]): p["fieldConfig"]["defaults"].get("unit")
        for b in build_all().values()
        for p in b["panels"]
        if p["type"] != "row"
    }
    shares = [q for q in QUERIES if units.get((q.dashboard_uid, q.panel_title)) == "percentunit"]
    assert len(shares) >= 10
    out_of_range = [
        (q.panel_title, r["metric"], r["value"][1])
        for q in shares
        for r in _results(prometheus, q)
        if not 0 <= float(r["value"][1]) <= 1
    ]
    assert not out_of_range, out_of_range
