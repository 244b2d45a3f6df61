"""Every alert the rendered rules define, routed through every Alertmanager config ragmon ships.

The alerts and their labels come from the files, never from a list here: the names and
static labels from deploy/prometheus/ragmon.rules.yml, the labels their expressions add
(tenant, worker, instance …) from the firing cases of the promtool unit tests, which
prove the rules produce exactly those. Each is routed by amlint (routing and
inhibition, simulated as Alertmanager does; `amlint test`) and by amtool (Alertmanager's
own routing code) through deploy/alertmanager.yml, which docker compose and `ragmon up`
load, and through deploy/k8s/alertmanagerconfig.yaml as the Prometheus Operator merges it.
What is intended is written once, in `intended_receiver` and `EXPLAINS` (docs/alerting.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.local import prometheus as local_prometheus
from tests.deploy.deployfiles import DEPLOY, K8S_DIR

RULES = DEPLOY / "prometheus" / "ragmon.rules.yml"
PROMTOOL_TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*.test.yml"))
PLAIN = DEPLOY / "alertmanager.yml"
K8S = K8S_DIR / "alertmanagerconfig.yaml"
K8S_RULES = K8S_DIR / "prometheusrule.yaml"
CANDIDATE = "candidate-b"
PAGERS = {"oncall-pager", "oncall-pager-tenant-acme"}
# Labels that say what an alert is, not where it happened: never unified between two alerts.
KIND_LABELS = {"alertname", "severity", "category", "guardrail"}

# (source, target) -> the label that binds them, and labels the target must have. Every other
# pair of alerts must not inhibit, even when they share every label they have in common.
EXPLAINS: dict[tuple[str, str], tuple[str, dict[str, str]]] = {
    ("RagmonWorkerHalted", "RagmonConsumerLag"): ("worker", {}),
    ("RagmonWorkerNotReady", "RagmonConsumerLag"): ("worker", {}),
    ("RagmonWorkerHalted", "RagmonFalseExclusionNoData"): ("worker", {}),
    ("RagmonWorkerNotReady", "RagmonFalseExclusionNoData"): ("worker", {}),
    ("RagmonWorkerHalted", "RagmonDeadLetters"): ("worker", {}),
    ("RagmonBrokerUnavailable", "RagmonIngestShedding"): ("instance", {}),
    ("RagmonScorerDown", "RagmonWorkerNotReady"): ("instance", {"worker": "faithfulness"}),
}


def intended_receiver(labels: dict[str, str]) -> str:
    """Where an alert must go: security events to security, shadow comparisons to the candidates' owners,
    alerts about a candidate variant to tickets, else by severity."""
    if labels.get("category") == "security":
        return "security"
    if labels.get("category") == "candidate":
        return "candidate-owners"  # a shadow comparison goes to the candidate's owners, never the pager
    if labels.get("variant", "production") != "production":
        return "team-queue"  # a shadow candidate never pages
    severity = labels.get("severity")
    if severity == "page":
        return "oncall-pager-tenant-acme" if labels.get("tenant") == "acme" else "oncall-pager"
    if severity == "ticket":
        return "team-queue"
    pytest.fail(
        f"{labels['alertname']}: severity {severity!r} has no route; add one to deploy/alertmanager.yml "
        "and to intended_receiver"
    )


def amlint_bin() -> str:
    found = Path(sys.executable).parent / "amlint"
    if not found.exists():
        pytest.fail("amlint is missing: pip install -e '.[dev]'")
    return str(found)


def amtool_bin() -> str:
    found = shutil.which("amtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("amtool missing in CI: .ci/run installs prometheus-alertmanager")
        pytest.skip("amtool not installed (apt-get install prometheus-alertmanager)")
    return found


def fired_labels() -> dict[str, dict[str, str]]:
    """alertname -> the labels of its first firing case in the promtool unit tests."""
    out: dict[str, dict[str, str]] = {}
    for path in PROMTOOL_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                if case.get("exp_alerts") and case["alertname"] not in out:
                    out[case["alertname"]] = {
                        k: str(v) for k, v in case["exp_alerts"][0]["exp_labels"].items()
                    }
    return out


def rendered_alerts() -> dict[str, dict[str, str]]:
    """alertname -> its full label set when it fires: rule labels plus what the expression adds."""
    fired = fired_labels()
    out = {}
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            name = rule["alert"]
            assert name in fired, f"{name}: no firing promtool case to take its labels from"
            out[name] = {"alertname": name, **fired[name], **{k: str(v) for k, v in rule["labels"].items()}}
    return out


ALERTS = rendered_alerts()


@dataclass(frozen=True)
class Target:
    """One shipped Alertmanager config and how its alerts and receivers look there."""

    path: Path
    input_format: str
    rules: Path
    extra_labels: tuple[tuple[str, str], ...] = ()
    receiver_prefix: str = ""

    def labels(self, labels: dict[str, str]) -> dict[str, str]:
        return {**labels, **dict(self.extra_labels)}


TARGETS = [
    Target(PLAIN, "alertmanager", RULES),
    # The operator scopes an AlertmanagerConfig to alerts of its namespace and prefixes its receivers.
    Target(K8S, "alertmanagerconfig", K8S_RULES, (("namespace", "ragmon"),), "ragmon/ragmon/"),
]
TARGET_IDS = ["compose-and-ragmon-up", "k8s"]


def run_amlint_test(target: Target, cases: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    cases_file = tmp_path / "routing-cases.yml"
    cases_file.write_text(yaml.safe_dump(cases, sort_keys=False))
    out = subprocess.run(
        [
            amlint_bin(),
            "test",
            "--input-format",
            target.input_format,
            "--format",
            "json",
            str(target.path),
            str(cases_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip(), out.stderr
    results: list[dict[str, Any]] = json.loads(out.stdout)
    assert len(results) == len(cases), out.stderr
    return results


def failures(results: list[dict[str, Any]]) -> list[str]:
    return [
        f"{r['name']}: delivered to {r['actual']}, inhibited={r.get('inhibited')} by {r.get('inhibited_by')}"
        for r in results
        if not r["passed"]
    ]


def routing_cases(target: Target) -> list[dict[str, Any]]:
    cases = []
    for name, labels in ALERTS.items():
        variants = {"as fired": labels, "for a candidate variant": {**labels, "variant": CANDIDATE}}
        if "tenant" in labels:
            variants["for another tenant"] = {**labels, "tenant": "globex"}
        for how, case_labels in variants.items():
            cases.append(
                {
                    "name": f"{name} {how}",
                    "labels": target.labels(case_labels),
                    "expect": [target.receiver_prefix + intended_receiver(case_labels)],
                }
            )
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_amlint_finds_nothing(target: Target) -> None:
    """Zero findings of any level, checked against the alerts the rules produce (--rules)."""
    out = subprocess.run(
        [
            amlint_bin(),
            "check",
            "--format",
            "json",
            "--input-format",
            target.input_format,
            "--rules",
            str(target.rules),
            str(target.path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and json.loads(out.stdout) == [], out.stdout + out.stderr


def test_ragmon_up_loads_the_checked_config() -> None:
    assert local_prometheus.ALERTMANAGER_CONFIG == PLAIN and PLAIN.is_file()


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_every_alert_reaches_its_intended_receiver_and_candidates_never_page(
    target: Target, tmp_path: Path
) -> None:
    cases = routing_cases(target)
    results = run_amlint_test(target, cases, tmp_path)
    assert not failures(results), "\n".join(failures(results))
    for result in results:
        assert result["routes"] and result["routes"] != ["route"], (
            f"{result['name']}: only the root route caught it"
        )
        if CANDIDATE in result["name"] or result["labels"].get("variant") == CANDIDATE:
            assert not {target.receiver_prefix + p for p in PAGERS} & set(result["actual"] or []), result[
                "name"
            ]


@pytest.mark.slow
def test_amtool_routes_every_alert_as_amlint_does() -> None:
    """Alertmanager's own routing code agrees on the plain config (amtool cannot simulate inhibition)."""
    amtool = amtool_bin()
    for case in routing_cases(TARGETS[0]):
        argv = [f"{k}={v}" for k, v in case["labels"].items()]
        out = subprocess.run(
            [amtool, "config", "routes", "test", f"--config.file={PLAIN}", *argv],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.stdout.strip().split(",") == case["expect"], (case["name"], out.stdout, out.stderr)


def inhibition_cases(target: Target) -> list[dict[str, Any]]:
    """Every ordered pair of alerts in the worst case (all shared labels equal), plus the bound pairs apart."""
    cases = []
    for (source_name, source), (target_name, victim) in (
        (s, t) for s in ALERTS.items() for t in ALERTS.items()
    ):
        if source_name == target_name:
            continue
        binding = EXPLAINS.get((source_name, target_name))
        victim = {**victim, **(binding[1] if binding else {})}
        shared = {k: victim[k] for k in source.keys() & victim.keys() - KIND_LABELS}
        firing = {**source, **shared}
        cases.append(
            {
                "name": f"{target_name} while {source_name} fires",
                "labels": target.labels(victim),
                "firing": [target.labels(firing)],
                "inhibited": binding is not None,
            }
        )
        if binding is not None:
            apart = {**firing, binding[0]: f"other-{victim[binding[0]]}"}
            cases.append(
                {
                    "name": f"{target_name} while {source_name} fires for another {binding[0]}",
                    "labels": target.labels(victim),
                    "firing": [target.labels(apart)],
                    "inhibited": False,
                }
            )
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_each_inhibition_silences_exactly_what_its_source_explains(target: Target, tmp_path: Path) -> None:
    for pair in EXPLAINS:
        assert set(pair) <= set(ALERTS), f"EXPLAINS names an alert the rules no longer define: {pair}"
    results = run_amlint_test(target, inhibition_cases(target), tmp_path)
    assert not failures(results), "\n".join(failures(results))


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=TARGET_IDS)
def test_a_not_ready_faithfulness_worker_mutes_no_tenant_symptom(target: Target, tmp_path: Path) -> None:
    """The defect this file fixed: a faithfulness worker without its weights is not ready for good."""
    not_ready = {**ALERTS["RagmonWorkerNotReady"], "worker": "faithfulness", "instance": "faith:9100"}
    symptoms = {n: a for n, a in ALERTS.items() if a["category"] == "symptom"}
    assert {"RagmonNoTraffic", "RagmonFalseExclusionNoData", "RagmonIngestShedding"} <= set(symptoms)
    cases = [
        {
            "name": f"{name} for tenant globex",
            "labels": target.labels({**labels, "tenant": "globex"}),
            "firing": [target.labels(not_ready)],
            "inhibited": False,
        }
        for name, labels in symptoms.items()
        if labels.get("worker") != "faithfulness"
    ]
    results = run_amlint_test(target, cases, tmp_path)
    assert not failures(results), "\n".join(failures(results))


@pytest.mark.slow
def test_an_alert_with_an_unrouted_severity_fails_the_routing_test() -> None:
    """The guard itself: a rule with a severity nobody routes is reported, not delivered to the fallback."""
    with pytest.raises(pytest.fail.Exception, match="severity 'warning' has no route"):
        intended_receiver({"alertname": "RagmonSomethingNew", "severity": "warning", "category": "pipeline"})
    out = subprocess.run(
        [
            amlint_bin(),
            "route",
            "--format",
            "json",
            str(PLAIN),
            "alertname=RagmonSomethingNew",
            "severity=warning",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert [r["path"] for r in json.loads(out.stdout)["routes"]] == [["route"]], out.stdout


@pytest.mark.slow
def test_committed_alertmanagerconfig_equals_a_fresh_render() -> None:
    out = subprocess.run(
        [sys.executable, str(K8S_DIR / "render_alertmanagerconfig.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_the_k8s_renderer_refuses_what_it_cannot_translate(tmp_path: Path) -> None:
    source = tmp_path / "alertmanager.yml"
    source.write_text("route: {receiver: r}\nreceivers: [{name: r, slack_configs: [{channel: '#x'}]}]\n")
    out = subprocess.run(
        [
            sys.executable,
            str(K8S_DIR / "render_alertmanagerconfig.py"),
            "--source",
            str(source),
            "--output",
            str(tmp_path / "out.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "only webhook_configs are translated" in out.stderr
