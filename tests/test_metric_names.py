"""Every metric a rule, a recording rule, a promtool test, a dashboard or the documentation names is
defined by some process, and every defined metric follows docs/conventions.md ("Metric names", "Labels").

Defined names come from the registries of every package's metrics.py, built on a
fresh CollectorRegistry; referenced names are read from the committed artifacts.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from service.api.metrics import ApiMetrics
from service.local.metrics import SupervisorMetrics
from workers.assembler.metrics import AssemblerMetrics
from workers.drift.metrics import DriftMetrics
from workers.evaluations.metrics import EvaluationsMetrics
from workers.exclusion.config import ExclusionConfig
from workers.exclusion.metrics import ExclusionMetrics
from workers.faithfulness.metrics import FaithfulnessMetrics
from workers.forwarder.metrics import ForwarderMetrics
from workers.metrics.metrics import MetricsWorkerMetrics
from workers.phoenix.metrics import PhoenixMetrics
from workers.probes.metrics import ProbesMetrics
from workers.review.metrics import ReviewMetrics
from workers.runtime.metrics import RuntimeMetrics
from workers.shadow.metrics import ShadowMetrics

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "prometheus" / "ragmon.rules.yml"

# One builder per metrics.py module; a new module must be added here.
BUILDERS: dict[str, Callable[[CollectorRegistry], object]] = {
    "service/api/metrics.py": ApiMetrics,
    "workers/runtime/metrics.py": lambda r: RuntimeMetrics(r, "probe"),
    "workers/metrics/metrics.py": MetricsWorkerMetrics,
    "workers/drift/metrics.py": DriftMetrics,
    "workers/faithfulness/metrics.py": FaithfulnessMetrics,
    "workers/exclusion/metrics.py": lambda r: ExclusionMetrics(r, ExclusionConfig()),
    "workers/phoenix/metrics.py": PhoenixMetrics,
    "workers/assembler/metrics.py": AssemblerMetrics,
    "workers/shadow/metrics.py": ShadowMetrics,
    "service/local/metrics.py": SupervisorMetrics,
    "workers/forwarder/metrics.py": ForwarderMetrics,
    "workers/evaluations/metrics.py": EvaluationsMetrics,
    "workers/review/metrics.py": ReviewMetrics,
    "workers/probes/metrics.py": ProbesMetrics,
}

SUBSYSTEMS = (
    "api",
    "worker",
    "rag",
    "feedback",
    "release",
    "faithfulness",
    "exclusion",
    "drift",
    "phoenix",
    "forwarder",
    "evaluations",
    "assembler",
    "supervisor",
    "shadow",
    "review",
)
NAME = re.compile(rf"^ragmon_({'|'.join(SUBSYSTEMS)})_[a-z0-9]+(_[a-z0-9]+)*$")
UNITS = (
    "_seconds",
    "_usd",
    "_ratio",
    "_bytes",
    "_tokens",
    "_queries",
    "_messages",
    "_partitions",
    "_events",
    "_traces",
    "_pairs",
)
FLAGS = ("_up", "_ready", "_halted", "_detected", "_info")
DIMENSIONLESS = {"ragmon_drift_mmd2", "ragmon_drift_mmd2_threshold"}  # statistics with no unit
# Cohen's kappa runs from -1 to 1: an agreement statistic, not a ratio of two counts (docs/review.md).
DIMENSIONLESS |= {"ragmon_review_judge_kappa", "ragmon_review_reviewer_kappa"}
# Shadow comparisons (docs/shadow.md): the delta, its interval and the detectable effect are in the unit
# of the compared metric, which the `metric` label names (seconds, USD, a rate); wins, losses, ties and
# pairs still needed count pairs; verdict and masked_regression are one-hot flags per verdict/slice.
DIMENSIONLESS |= {
    f"ragmon_shadow_{n}"
    for n in (
        "delta",
        "interval_lower",
        "interval_upper",
        "detectable_effect",
        "wins",
        "losses",
        "ties",
        "pairs_needed",
        "verdict",
        "masked_regression",
    )
}
NEVER_LABELS = {
    "id",
    "event_id",
    "trace_id",
    "request_id",
    "session_id",
    "query",
    "text",
    "answer",
    "user",
    "doc_id",
    "document",
    "value",
    "path",
    "url",
}
# A metric name; not a metadata key the assembler writes (`metadata.ragmon_truncated`).
REFERENCE = re.compile(r"(?<!metadata\.)\bragmon_[a-z0-9_]+\b")
RECORDED = re.compile(r"\bragmon:[a-z0-9_:]+\b")


@dataclass(frozen=True)
class Defined:
    name: str  # as exposed: counters with _total
    kind: str
    labels: tuple[str, ...]
    module: str

    def exposed(self) -> set[str]:
        if self.kind == "histogram":
            return {self.name, *(self.name + s for s in ("_bucket", "_count", "_sum"))}
        return {self.name}


def _defined_in(module: str) -> list[Defined]:
    registry = CollectorRegistry()
    holder = BUILDERS[module](registry)
    found = []
    for metric in vars(holder).values():
        describe = getattr(metric, "describe", None)
        if describe is None:
            continue
        (family,) = describe()
        name = family.name + "_total" if family.type == "counter" else family.name
        labels = metric._labelnames  # prometheus_client keeps label names only here
        assert isinstance(labels, tuple)
        found.append(Defined(name, family.type, labels, module))
    assert {d.name for d in found} == _registered(registry), f"{module}: a metric is registered but not kept"
    return found


def _registered(registry: CollectorRegistry) -> set[str]:
    return {f.name + "_total" if f.type == "counter" else f.name for f in registry.collect()}


@pytest.fixture(scope="module")
def defined() -> list[Defined]:
    modules = sorted(
        str(p.relative_to(ROOT)) for d in ("service", "workers") for p in (ROOT / d).rglob("metrics.py")
    )
    assert modules == sorted(BUILDERS), "every metrics.py module needs a builder in BUILDERS"
    found = [d for module in modules for d in _defined_in(module)]
    assert len(found) > 60, "the registries were read"
    names = [d.name for d in found]
    assert len(names) == len(set(names)), "two processes define the same metric name"
    return found


def _dashboard_texts() -> list[str]:
    texts = []
    for path in sorted((ROOT / "dashboards" / "grafana").glob("*.json")):
        texts.append(json.dumps(json.loads(path.read_text())))
    assert texts, "no dashboards found"
    return texts


def _rule_texts() -> tuple[list[str], set[str]]:
    doc = yaml.safe_load(RULES.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    assert rules, "no rules found"
    texts = [r["expr"] + " " + " ".join(r.get("annotations", {}).values()) for r in rules]
    recorded = {r["record"] for r in rules if "record" in r}
    return texts, recorded


def _documentation_texts() -> list[str]:
    paths = [ROOT / "README.md", ROOT / "deploy" / "runbooks.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p.read_text() for p in paths]


def _promtool_texts() -> list[str]:
    paths = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yml"))
    assert paths
    return [p.read_text() for p in paths]


def test_every_referenced_metric_is_defined(defined: list[Defined]) -> None:
    exposed = set().union(*(d.exposed() for d in defined))
    rules, recorded = _rule_texts()
    sources: dict[str, list[str]] = {
        "rules": rules,
        "dashboards": _dashboard_texts(),
        "promtool tests": _promtool_texts(),
        "documentation": _documentation_texts(),
    }
    missing = {}
    for source, texts in sources.items():
        referenced = {name for text in texts for name in REFERENCE.findall(text)}
        assert referenced, f"no metric found in {source}"
        unknown = referenced - exposed
        if unknown:
            missing[source] = sorted(unknown)
    assert missing == {}, "referenced but defined by no process"


def test_every_recorded_series_read_is_recorded_by_a_rule() -> None:
    rules, recorded = _rule_texts()
    read = {name for text in rules + _dashboard_texts() for name in RECORDED.findall(text)}
    assert recorded and read
    assert read - recorded == set()


def test_every_defined_name_follows_the_conventions(defined: list[Defined]) -> None:
    wrong = {d.name: problem for d in defined if (problem := _problem(d))}
    assert wrong == {}


def _problem(d: Defined) -> str:
    name = d.name
    if not NAME.match(name):
        return f"not ragmon_<subsystem>_<name> with a subsystem of {SUBSYSTEMS}"
    if "_bool" in name or "_statistic" in name:
        return "no _bool (say what 1 means: _up, _ready, _detected) and no _statistic"
    if d.kind == "counter":
        return "" if name.endswith("_total") else "a counter ends in _total"
    if name.endswith("_total"):
        return "only counters end in _total"
    if d.kind == "histogram":
        if name.endswith("_seconds") and not name.endswith("_duration_seconds"):
            return "a duration histogram ends in _duration_seconds"
        return "" if name.endswith(UNITS) else f"a histogram ends in a unit of {UNITS}"
    if name.endswith("_seconds") and not name.endswith(("_timestamp_seconds", "_duration_seconds")):
        return "a gauge in seconds is a _timestamp_seconds or a _duration_seconds"
    if name.endswith(UNITS + FLAGS) or name in DIMENSIONLESS:
        return ""
    return f"a gauge ends in a unit {UNITS} or a flag {FLAGS}"


def test_labels_come_from_closed_sets(defined: list[Defined]) -> None:
    wrong = {d.name: sorted(NEVER_LABELS & set(d.labels)) for d in defined if NEVER_LABELS & set(d.labels)}
    assert wrong == {}


@pytest.mark.parametrize("module", sorted(BUILDERS))
def test_names_are_written_out_in_full_where_defined(module: str, defined: list[Defined]) -> None:
    source = (ROOT / module).read_text()
    for d in (d for d in defined if d.module == module):
        assert f'"{d.name}"' in source, f"{d.name} is not written out in {module}"
    assembled = [
        getattr(node, "lineno", 0) for node in ast.walk(ast.parse(source)) if _assembles_a_name(node)
    ]
    assert assembled == [], f"{module}: metric names assembled from pieces at lines {assembled}"


def _assembles_a_name(node: Any) -> bool:
    parts: list[Any] = []
    if isinstance(node, ast.JoinedStr):
        parts = node.values
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = [node.left, node.right]
    return any(
        isinstance(p, ast.Constant) and isinstance(p.value, str) and "ragmon_" in p.value for p in parts
    )


def test_the_checker_catches_bad_names() -> None:
    bad = [
        Defined("ragmon_drift_detected_bool", "gauge", (), "x"),
        Defined("ragmon_drift_mmd2_statistic", "gauge", (), "x"),
        Defined("ragmon_worker_event_delay_seconds", "histogram", (), "x"),
        Defined("ragmon_rag_queries", "counter", (), "x"),
        Defined("ragmon_misc_queries_total", "counter", (), "x"),
        Defined("ragmon_api_inflight", "gauge", (), "x"),
    ]
    assert all(_problem(d) for d in bad)
    assert _assembles_a_name(ast.parse('PREFIX + "ragmon_x_"').body[0].value)  # type: ignore[attr-defined]
