"""Rendered Prometheus rules, their promtool unit tests, Alertmanager routing and runbooks."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from service.contracts.config import ConfigError
from service.rules.cli import DEFAULT_OUT, rendered_text
from service.rules.config import GuardrailsConfig
from service.rules.render import render
from tests.support.tools import require_tool

ROOT = Path(__file__).resolve().parents[3]
PROM = ROOT / "deploy" / "prometheus"
TESTS = sorted((PROM / "tests").glob("*.test.yml"))


def tool(name: str) -> str:
    return require_tool(name)


def alerts(doc: dict) -> list[dict]:  # type: ignore[type-arg]
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def test_committed_rules_equal_a_fresh_render() -> None:
    assert DEFAULT_OUT.read_text() == rendered_text(None), "run `ragmon rules render` and commit the result"


@pytest.mark.slow
def test_promtool_checks_the_rules() -> None:
    out = subprocess.run(
        [tool("promtool"), "check", "rules", str(DEFAULT_OUT)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _promtool_test(test_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), "test", "rules", test_file.name],
        cwd=test_file.parent,
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def promtool_runs(
    request: pytest.FixtureRequest,
) -> Iterator[dict[Path, Future[subprocess.CompletedProcess[str]]]]:
    """The selected test files' promtool runs, two at a time (promtool evaluates on one core, the
    machine has two): the 15 files take about 77 s this way instead of about 113 s one after another."""
    selected = [
        item.callspec.params["test_file"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_promtool_unit_tests_pass"
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {f: pool.submit(_promtool_test, f) for f in selected}


@pytest.mark.slow
@pytest.mark.parametrize("test_file", TESTS, ids=[t.name for t in TESTS])
def test_promtool_unit_tests_pass(
    test_file: Path, promtool_runs: dict[Path, Future[subprocess.CompletedProcess[str]]]
) -> None:
    out = promtool_runs[test_file].result(timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_alert_is_tested_on_both_sides() -> None:
    cases: dict[str, list[bool]] = {}
    for path in TESTS:
        for t in yaml.safe_load(path.read_text())["tests"]:
            for case in t.get("alert_rule_test", []):
                cases.setdefault(case["alertname"], []).append(bool(case.get("exp_alerts")))
    for rule in alerts(yaml.safe_load(DEFAULT_OUT.read_text())):
        seen = cases.get(rule["alert"], [])
        assert True in seen and False in seen, f"{rule['alert']} needs a firing and a not-firing case"


def test_every_alert_has_the_required_fields_and_a_runbook_section() -> None:
    runbook = (ROOT / "deploy" / "runbooks.md").read_text()
    anchors = {h.strip().lower() for h in re.findall(r"^## (\S+)", runbook, flags=re.M)}
    for rule in alerts(yaml.safe_load(DEFAULT_OUT.read_text())):
        assert "for" in rule and rule["labels"]["severity"] in ("page", "ticket"), rule["alert"]
        ann = rule["annotations"]
        assert {"summary", "description", "runbook_url"} <= set(ann), rule["alert"]
        triaged = rule["labels"]["category"] in ("guardrail", "security")
        # The release-or-drift hint is for what the app serves, not for the pipeline or its symptoms.
        assert ("triage" in ann) == triaged, rule["alert"]
        base, anchor = ann["runbook_url"].rsplit("#", 1)
        assert base == "deploy/runbooks.md", "the default points at the runbook inside the repository"
        assert anchor == rule["alert"].lower() and anchor in anchors, (
            f"no runbook section for {rule['alert']}"
        )


def test_pipeline_alerts_fire_while_the_condition_holds() -> None:
    """No `increase(...) > 0` held for a while: it fires as a short problem ends and lingers a window after.

    An alert on 'any event in the window' has for: 0 (it fires at once and clears a window later);
    one that must persist looks at the current rate, so a blip shorter than for: never fires
    (deploy/prometheus/tests/recovery.test.yml checks both on promtool).
    """
    for rule in alerts(render(GuardrailsConfig())):
        if rule["labels"]["category"] not in ("pipeline", "symptom"):
            continue
        firing_side = rule["expr"].split("unless", 1)[0]  # after `unless`: evidence whose absence fires
        if re.search(r"increase\([^)]*\[[^]]+\]\)\)? > 0", firing_side):
            assert rule["for"] in ("0m", "0s"), rule["alert"]
            window = re.search(r"\[(\d+)m\]", firing_side)
            assert window and int(window.group(1)) <= 5, f"{rule['alert']} lingers too long after recovery"


def test_guardrails_only_look_at_production() -> None:
    for rule in alerts(render(GuardrailsConfig())):
        if rule["labels"]["category"] == "guardrail" and rule["labels"]["guardrail"] != "drift":
            selectors = re.findall(r"ragmon:[a-z_:]+\{([^}]*)\}", rule["expr"])
            assert selectors and all('variant="production"' in s for s in selectors), rule["alert"]


@pytest.mark.slow
def test_tenant_override_fires_at_its_own_threshold(tmp_path: Path) -> None:
    """acme's floor is 0.8: its mean of 0.7 fires; globex at 0.7 stays under the default 0.5 floor."""
    config = tmp_path / "ragmon.yaml"
    config.write_text("guardrails:\n  tenants:\n    acme:\n      faithfulness: {min_mean_score: 0.8}\n")
    (tmp_path / "rules.yml").write_text(rendered_text(str(config)))
    series = []
    for tenant in ("acme", "globex"):
        series += [
            {
                "series": f'ragmon_faithfulness_score_ratio_sum{{tenant="{tenant}",variant="production"}}',
                "values": "0+1.4x60",
            },
            {
                "series": f'ragmon_faithfulness_score_ratio_count{{tenant="{tenant}",variant="production"}}',
                "values": "0+2x60",
            },
        ]
    (tmp_path / "t.test.yml").write_text(
        yaml.safe_dump(
            {
                "rule_files": ["rules.yml"],
                "evaluation_interval": "1m",
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": series,
                        "promql_expr_test": [
                            {
                                "eval_time": "45m",
                                "expr": 'ALERTS{alertname="RagmonFaithfulnessLow", alertstate="firing"}',
                                "exp_samples": [
                                    {
                                        "value": 1,
                                        "labels": 'ALERTS{alertname="RagmonFaithfulnessLow", alertstate="firing", '
                                        'severity="page", category="guardrail", guardrail="faithfulness", tenant="acme", '
                                        'variant="production"}',
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        )
    )
    out = subprocess.run(
        [tool("promtool"), "test", "rules", "t.test.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("guardrails:\n  cost: {window: 5 minutes}\n", "guardrails.cost.window"),
        ("guardrails:\n  tenants: {acme: {drift: {for: 1m}}}\n", "no per-tenant overrides"),
        ("guardrails:\n  tenants: {acme: {cost: {window: 1h}}}\n", "not overridable per tenant"),
        ("guardrails:\n  latency: {quantile: 1.5}\n", "guardrails.latency.quantile"),
    ],
)
def test_bad_guardrail_config_names_the_field(tmp_path: Path, yaml_text: str, message: str) -> None:
    config = tmp_path / "ragmon.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        rendered_text(str(config))


@pytest.mark.slow
def test_alertmanager_config_is_valid_and_routes() -> None:
    amtool = tool("amtool")
    cfg = str(ROOT / "deploy" / "alertmanager.yml")
    out = subprocess.run([amtool, "check-config", cfg], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    expectations = {
        ("severity=page", "tenant=globex", "alertname=RagmonLatencyAboveSLO"): "oncall-pager",
        ("severity=page", "tenant=acme", "alertname=RagmonFaithfulnessLow"): "oncall-pager-tenant-acme",
        ("severity=page", "category=security", "tenant=globex"): "security",
        ("severity=ticket", "tenant=globex", "alertname=RagmonCostPerQueryOverBudget"): "team-queue",
        (
            "severity=ticket",
            "category=candidate",
            "tenant=acme",
            "alertname=RagmonShadowCandidateWorse",
        ): "candidate-owners",
        # a candidate never pages, even if someone raised its severity
        ("severity=page", "category=candidate", "tenant=acme"): "candidate-owners",
    }
    for labels, receiver in expectations.items():
        out = subprocess.run(
            [amtool, "config", "routes", "test", f"--config.file={cfg}", *labels],
            capture_output=True,
            text=True,
        )
        assert out.stdout.strip() == receiver, (labels, out.stdout, out.stderr)


def test_every_inhibition_is_bound_by_a_shared_label() -> None:
    """An inhibition without `equal` mutes its targets everywhere (tests/deploy/test_alert_routing.py routes them)."""
    cfg = yaml.safe_load((ROOT / "deploy" / "alertmanager.yml").read_text())
    assert cfg["inhibit_rules"]
    for rule in cfg["inhibit_rules"]:
        assert rule.get("equal"), rule


def test_the_runbook_base_url_is_configuration() -> None:
    cfg = GuardrailsConfig(runbook_base_url="https://runbooks.example.com/ragmon.md")
    urls = {
        r["annotations"]["runbook_url"] for g in render(cfg)["groups"] for r in g["rules"] if "alert" in r
    }
    assert urls and all(u.startswith("https://runbooks.example.com/ragmon.md#ragmon") for u in urls)
