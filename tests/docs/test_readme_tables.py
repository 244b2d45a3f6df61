"""README.md's lists of workers, alerts and dashboards against the code and deploy/ files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from service.local.discovery import worker_names
from tests.docs.markdown import ROOT, code, section, table

README = (ROOT / "README.md").read_text()
RULE_FILES = (
    ROOT / "deploy" / "prometheus" / "ragmon.rules.yml",
    ROOT / "deploy" / "k8s" / "prometheusrule.yaml",
)


def _alerts(path: Path) -> set[str]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    groups = doc["groups"] if "groups" in doc else doc["spec"]["groups"]  # a PrometheusRule has them in spec
    return {rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule}


def _dashboards() -> dict[str, str]:
    boards = [json.loads(p.read_text()) for p in sorted((ROOT / "dashboards" / "grafana").glob("*.json"))]
    return {b["uid"]: b["title"] for b in boards}


def test_the_alerts_table_lists_every_alert_of_the_rule_files() -> None:
    listed = [r["alert"] for r in table(section(README, "Alerts and dashboards"), "alert")]
    assert len(listed) == len(set(listed)), "an alert is listed twice"
    for path in RULE_FILES:
        assert set(listed) == _alerts(path), path.relative_to(ROOT)


def test_the_dashboards_table_lists_every_generated_dashboard() -> None:
    rows = table(section(README, "Alerts and dashboards"), "dashboard")
    assert {code(r["uid"]): r["dashboard"] for r in rows} == _dashboards()


def test_what_the_workers_compute_names_every_worker() -> None:
    bullets = re.findall(r"^\* \*\*([a-z_]+)\*\*", section(README, "What the workers compute"), re.M)
    assert sorted(bullets) == sorted(set(bullets)) == worker_names()


def test_the_architecture_diagram_names_every_worker() -> None:
    diagram = section(README, "Architecture").split("```")[1]
    listed = re.findall(r"^ {5}([a-z_]+) {2,}\S", diagram, re.M)
    assert sorted(listed) == worker_names()
