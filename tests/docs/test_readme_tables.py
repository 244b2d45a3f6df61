"""README.md's lists of workers, alerts and dashboards against the code's registries and deploy/ files.

Alerts: what `ragmon rules render` renders now (service/rules), and the two
committed rule files. Dashboards: `dashboards.generate.build_all()` (the
builders of dashboards/boards/) and the committed dashboards/grafana/*.json.
Workers: the `WORKER` of every workers/NAME/__main__.py (tests/docs/registry.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from dashboards.generate import build_all
from service.rules.cli import rendered_text
from tests.docs import registry
from tests.docs.markdown import ROOT, code, section, table

README = (ROOT / "README.md").read_text()
RULE_FILES = (
    ROOT / "deploy" / "prometheus" / "ragmon.rules.yml",
    ROOT / "deploy" / "k8s" / "prometheusrule.yaml",
)


def _alerts_of(text: str) -> set[str]:
    doc: dict[str, Any] = yaml.safe_load(text)
    groups = doc["groups"] if "groups" in doc else doc["spec"]["groups"]  # a PrometheusRule has them in spec
    return {rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule}


WORKERS = sorted(registry.specs())


def _committed_dashboards() -> dict[str, str]:
    boards = [json.loads(p.read_text()) for p in sorted((ROOT / "dashboards" / "grafana").glob("*.json"))]
    return {b["uid"]: b["title"] for b in boards}


def _built_dashboards() -> dict[str, str]:
    return {b["uid"]: b["title"] for b in build_all().values()}


def test_the_alerts_table_lists_every_rendered_alert() -> None:
    listed = [r["alert"] for r in table(section(README, "Alerts and dashboards"), "alert")]
    assert len(listed) == len(set(listed)), "an alert is listed twice"
    rendered = _alerts_of(rendered_text(None))
    assert len(rendered) >= 20, "the rendered rules were read"
    assert set(listed) == rendered
    for path in RULE_FILES:
        assert set(listed) == _alerts_of(path.read_text()), path.relative_to(ROOT)


def test_the_dashboards_table_lists_every_dashboard() -> None:
    rows = table(section(README, "Alerts and dashboards"), "dashboard")
    listed = {code(r["uid"]): r["dashboard"] for r in rows}
    assert len(rows) == len(listed), "a dashboard is listed twice"
    built = _built_dashboards()
    assert len(built) == len(list((ROOT / "dashboards" / "boards").glob("[!_]*.py"))), (
        "a module of dashboards/boards builds no dashboard"
    )
    assert listed == built == _committed_dashboards()


def test_what_the_workers_compute_names_every_worker() -> None:
    bullets = re.findall(r"^\* \*\*([a-z_]+)\*\*", section(README, "What the workers compute"), re.M)
    assert len(WORKERS) >= 9
    assert sorted(bullets) == sorted(set(bullets)) == WORKERS


def test_the_architecture_diagram_names_every_worker() -> None:
    diagram = section(README, "Architecture").split("```")[1]
    listed = re.findall(r"^ {5}([a-z_]+) {2,}\S", diagram, re.M)
    assert sorted(listed) == WORKERS
