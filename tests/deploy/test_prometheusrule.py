"""deploy/k8s/prometheusrule.yaml is a faithful, up-to-date render of deploy/prometheus/*.rules.yml."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.deploy.deployfiles import DEPLOY, K8S_DIR, k8s_named


def _load_renderer() -> ModuleType:
    if str(K8S_DIR) not in sys.path:  # as when run as a script: it imports its sibling render_cli
        sys.path.insert(0, str(K8S_DIR))
    spec = importlib.util.spec_from_file_location(
        "render_prometheusrule", K8S_DIR / "render_prometheusrule.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


render_prometheusrule = _load_renderer()

GROUP_A = """groups:
- name: a-recording
  rules:
  - record: ragmon:x:rate5m
    expr: sum by (tenant) (rate(ragmon_x_total[5m]))
"""
GROUP_B = """groups:
- name: b-alerts
  interval: 30s
  rules:
  - alert: RagmonX
    expr: |-
      ragmon:x:rate5m
        > 1
    for: 5m
    labels:
      severity: page
    annotations:
      summary: "x is {{ $value }} for {{ $labels.tenant }}"
"""


def test_committed_prometheusrule_equals_a_fresh_render() -> None:
    committed = (K8S_DIR / "prometheusrule.yaml").read_text()
    assert committed == render_prometheusrule.render(DEPLOY / "prometheus"), (
        "deploy/k8s/prometheusrule.yaml is stale: run python deploy/k8s/render_prometheusrule.py"
    )


def test_committed_prometheusrule_carries_every_group_of_every_rule_file() -> None:
    groups = [
        g
        for f in sorted((DEPLOY / "prometheus").glob("*.rules.yml"))
        for g in (yaml.safe_load(f.read_text()) or {}).get("groups") or []
    ]
    assert k8s_named("PrometheusRule", "ragmon")["spec"]["groups"] == [_with_namespace(g) for g in groups]


def _with_namespace(group: dict) -> dict:  # type: ignore[type-arg]
    """What the renderer adds: `namespace: ragmon` on alerts (the namespaced AlertmanagerConfig needs it)."""
    return {
        **group,
        "rules": [
            {**r, "labels": {**r.get("labels", {}), "namespace": "ragmon"}} if "alert" in r else r
            for r in group["rules"]
        ],
    }


def test_every_alert_carries_the_namespace_and_recording_rules_do_not() -> None:
    rules = [r for g in k8s_named("PrometheusRule", "ragmon")["spec"]["groups"] for r in g["rules"]]
    assert all(r["labels"]["namespace"] == "ragmon" for r in rules if "alert" in r)
    assert not any("labels" in r for r in rules if "record" in r)


def test_render_keeps_groups_in_file_order_and_scopes_alerts_to_the_namespace(tmp_path: Path) -> None:
    (tmp_path / "b.rules.yml").write_text(GROUP_B)
    (tmp_path / "a.rules.yml").write_text(GROUP_A)
    (tmp_path / "a.test.yml").write_text("rule_files: [a.rules.yml]\n")  # promtool tests are not rules
    rendered = yaml.safe_load(render_prometheusrule.render(tmp_path))
    assert rendered["apiVersion"] == "monitoring.coreos.com/v1" and rendered["kind"] == "PrometheusRule"
    expected = [
        _with_namespace(g) for g in yaml.safe_load(GROUP_A)["groups"] + yaml.safe_load(GROUP_B)["groups"]
    ]
    assert rendered["spec"]["groups"] == expected
    assert "|-\n" in render_prometheusrule.render(tmp_path), "multi-line PromQL stays readable"


def test_render_without_rule_files_has_no_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prometheusrule.yaml"
    assert render_prometheusrule.main(["--rules-dir", str(tmp_path), "--output", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["spec"]["groups"] == []
    assert "no *.rules.yml" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (GROUP_A + GROUP_A.replace("groups:\n", ""), "also defined"),
        ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    severity: page\n", "CRD rejects"),
        ("groups:\n- name: g\n  rules:\n  - expr: up\n", "one of `alert`/`record`"),
        ("groups:\n- name: g\n  evaluation: 1m\n  rules: []\n", "CRD rejects"),
        ("rule_files: [x]\n", "one key, `groups`"),
        ("groups: [\n", "not valid YAML"),
    ],
)
def test_render_rejects_what_the_operator_or_prometheus_would(
    tmp_path: Path, text: str, problem: str
) -> None:
    (tmp_path / "x.rules.yml").write_text(text)
    with pytest.raises(render_prometheusrule.RenderError, match=problem):
        render_prometheusrule.render(tmp_path)


def test_duplicate_group_across_files_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "a.rules.yml").write_text(GROUP_A)
    (tmp_path / "b.rules.yml").write_text(GROUP_A)
    with pytest.raises(render_prometheusrule.RenderError, match="also defined in a.rules.yml"):
        render_prometheusrule.render(tmp_path)


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    (tmp_path / "a.rules.yml").write_text(GROUP_A)
    out = tmp_path / "prometheusrule.yaml"
    args = ["--rules-dir", str(tmp_path), "--output", str(out)]
    assert render_prometheusrule.main([*args, "--check"]) == 1  # missing
    assert render_prometheusrule.main(args) == 0
    assert render_prometheusrule.main([*args, "--check"]) == 0
    (tmp_path / "b.rules.yml").write_text(GROUP_B)
    assert render_prometheusrule.main([*args, "--check"]) == 1
    (tmp_path / "c.rules.yml").write_text("groups: [\n")
    assert render_prometheusrule.main(args) == 2
