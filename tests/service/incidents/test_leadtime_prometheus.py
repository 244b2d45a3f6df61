"""Lead times read from a real Prometheus whose history is known to the second.

The history (alerts firing, their pending starts, the recorded series the thumbs-down and regenerate
bands read) is written as OpenMetrics, turned into TSDB blocks by `promtool tsdb create-blocks-from
openmetrics`, and served by a real Prometheus that loads the project's rule file: `ragmon incidents
lead-time` reads the rules, the ALERTS and ALERTS_FOR_STATE series and the band expressions over its HTTP
API, and must find the lead times written into the history.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from service.incidents.cli import main
from service.local.embedded import free_port, wait_for_port
from tests.dashboards.catalog import RULES
from tests.support.leaks import stop_process
from tests.support.tools import require_tool

pytestmark = pytest.mark.slow
STEP = 15
MINUTE = 60


@dataclass(frozen=True)
class History:
    t0: int
    end: int
    url: str


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _alert(
    name: str, guardrail: str, tenant: str, pending: int, firing: tuple[int, int]
) -> dict[str, object]:
    return {
        "labels": {
            "alertname": name,
            "category": "guardrail",
            "guardrail": guardrail,
            "severity": "page",
            "tenant": tenant,
            "variant": "production",
        },
        "pending": pending,
        "firing": firing,
    }


def _openmetrics(t0: int, end: int) -> str:
    m = MINUTE
    alerts = [
        # acme: faithfulness pending at +20 min, firing +30..+50; thumbs-down band holds +42..+70: lead +12 min
        _alert("RagmonFaithfulnessLow", "faithfulness", "acme", t0 + 20 * m, (t0 + 30 * m, t0 + 50 * m)),
        # globex: latency firing +60..+65 min; regenerate band holds from +55: users first by 5 min
        _alert("RagmonLatencyAboveSLO", "latency", "globex", t0 + 58 * m, (t0 + 60 * m, t0 + 65 * m)),
        # initech: cost firing at +80 with no user signal
        _alert("RagmonCostPerQueryOverBudget", "cost", "initech", t0 + 75 * m, (t0 + 80 * m, t0 + 90 * m)),
    ]
    lines: list[str] = ["# TYPE ALERTS gauge"]
    for a in alerts:
        lo, hi = a["firing"]  # type: ignore[misc]
        labels = {**a["labels"], "alertstate": "firing"}  # type: ignore[dict-item]
        lines += [f"ALERTS{_labels(labels)} 1 {t}" for t in range(lo, hi + 1, STEP)]
    lines.append("# TYPE ALERTS_FOR_STATE gauge")
    for a in alerts:
        lo, hi = a["firing"]  # type: ignore[misc]
        lines += [
            f"ALERTS_FOR_STATE{_labels(a['labels'])} {a['pending']} {t}"  # type: ignore[arg-type]
            for t in range(a["pending"], hi + 1, STEP)  # type: ignore[call-overload]
        ]

    def band(prefix: str, count: str, tenant: str, high: list[tuple[int, int]]) -> list[str]:
        labels = _labels({"tenant": tenant, "variant": "production"})
        out = []
        for name, value_of in (
            ("rate", lambda t: 0.30 if any(a <= t < b for a, b in high) else 0.05),
            ("baseline_rate", lambda t: 0.05),
            ("band_half_width", lambda t: 0.02),
            (count, lambda t: 500),
            (f"baseline_{count}", lambda t: 5000),
        ):
            out.append(f"# TYPE ragmon:{prefix}:{name} gauge")
            out += [f"ragmon:{prefix}:{name}{labels} {value_of(t)} {t}" for t in range(t0, end + 1, STEP)]
        return out

    lines += band("thumbs_down", "votes", "acme", [(t0 + 42 * m, t0 + 70 * m)])
    lines += band("regeneration", "queries", "globex", [(t0 + 55 * m, t0 + 66 * m)])
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    prometheus, promtool = require_tool("prometheus"), require_tool("promtool")
    work: Path = tmp_path_factory.mktemp("leadtime")
    end = int(time.time()) // 3600 * 3600 - 3600  # whole hours in the past, away from the head block
    t0 = end - 2 * 3600
    (work / "history.om").write_text(_openmetrics(t0, end))
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(work / "history.om"), str(work / "data")],
        check=True,
        capture_output=True,
    )
    (work / "prometheus.yml").write_text(
        yaml.safe_dump({"global": {"evaluation_interval": "15s"}, "rule_files": [str(RULES)]})
    )
    port = free_port()
    argv = [
        prometheus,
        f"--config.file={work / 'prometheus.yml'}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.path={work / 'data'}",
        "--storage.tsdb.retention.time=30d",
    ]
    with open(work / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port("127.0.0.1", port, 30, proc)
            deadline = time.monotonic() + 30
            while httpx.get(f"http://127.0.0.1:{port}/-/ready", timeout=5).status_code != 200:
                assert time.monotonic() < deadline and proc.poll() is None, "Prometheus never became ready"
                time.sleep(0.2)
            yield History(t0, end, f"http://127.0.0.1:{port}")
        finally:
            stop_process(proc)


def _report(history: History, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    args = ["lead-time", "--prometheus", history.url, "--since", str(history.t0), "--until", str(history.end)]
    assert main([*args, "--step", "15s", "--format", "json", *extra]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_lead_times_are_the_ones_written_into_the_history(
    history: History, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(history, capsys, "--window", "30m")
    episodes = {e["alert"]["name"]: e for e in report["episodes"]}  # type: ignore[attr-defined]
    assert set(episodes) == {"RagmonFaithfulnessLow", "RagmonLatencyAboveSLO", "RagmonCostPerQueryOverBudget"}
    faith = episodes["RagmonFaithfulnessLow"]
    assert faith["alert"]["tenant"] == "acme" and faith["alert"]["start"] == history.t0 + 30 * MINUTE
    assert faith["alert"]["active_since"] == history.t0 + 20 * MINUTE
    assert faith["user_rise"]["name"] == "RagmonThumbsDownOutOfBand"
    assert faith["lead_s"] == 12 * MINUTE and faith["detection_lead_s"] == 22 * MINUTE
    latency = episodes["RagmonLatencyAboveSLO"]
    assert latency["user_rise"]["name"] == "RagmonRegenerationOutOfBand"
    assert latency["lead_s"] == -5 * MINUTE  # users noticed first
    cost = episodes["RagmonCostPerQueryOverBudget"]
    assert cost["user_rise"] is None and cost["lead_s"] is None  # initech's users said nothing
    summary = {s["alert"]: s for s in report["summary"]}  # type: ignore[attr-defined]
    assert summary["RagmonLatencyAboveSLO"]["users_first"] == 1
    assert summary["RagmonCostPerQueryOverBudget"]["median_lead_s"] is None


def test_a_rise_far_from_every_alert_is_reported_as_unseen_by_the_guardrails(
    history: History, capsys: pytest.CaptureFixture[str]
) -> None:
    # with a 5-minute window the acme thumbs-down rise (12 minutes after the alert) matches nothing
    report = _report(history, capsys, "--window", "5m")
    unseen = report["user_rises_without_alert"]
    assert [(r["name"], r["tenant"]) for r in unseen] == [("RagmonThumbsDownOutOfBand", "acme")]  # type: ignore[attr-defined]


def test_one_tenant_only(history: History, capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(history, capsys, "--tenant", "globex")
    assert {e["alert"]["tenant"] for e in report["episodes"]} == {"globex"}  # type: ignore[attr-defined]


def test_the_markdown_report_names_the_finding(history: History, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["lead-time", "--prometheus", history.url, "--since", str(history.t0), "--until", str(history.end)]
    assert main([*args, "--step", "15s", "--window", "30m"]) == 0
    text = capsys.readouterr().out
    assert "| RagmonFaithfulnessLow | 1 | 1 | 0 | +12 min | +12 min | +12 min |" in text
    assert (
        "users beat RagmonLatencyAboveSLO for globex: RagmonRegenerationOutOfBand rose 5 min before" in text
    )


def test_an_unreachable_store_is_an_error_not_an_empty_report(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert main(["lead-time", "--prometheus", f"http://127.0.0.1:{port}", "--since", "1h"]) == 1
    assert "cannot read the alert history" in capsys.readouterr().err
