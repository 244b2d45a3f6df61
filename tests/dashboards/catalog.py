"""The metric names the project defines, and their labels, read from the code itself.

Each `metrics.py` under service/ and workers/ is imported and every metrics
class it defines is instantiated with a fresh CollectorRegistry; the registry
says which families exist and of what type, which gives the series names a
query may use (a counter's `_total`, a histogram's `_bucket`/`_sum`/`_count`).
Recording rules come from deploy/prometheus/ragmon.rules.yml.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from dashboards.promql import metric_names, tokens

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "ragmon.rules.yml"
# Series Prometheus itself makes: the scrape health and the alert state of the rules it evaluates.
PROMETHEUS_SERIES = {"up": frozenset({"job", "instance"}), "ALERTS": frozenset()}
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": ("",),
    "summary": ("", "_sum", "_count"),
    "info": ("_info",),
}


def metrics_modules() -> list[str]:
    files = sorted(ROOT.glob("service/**/metrics.py")) + sorted(ROOT.glob("workers/**/metrics.py"))
    return [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in files]


def _argument(cls: type, name: str, hint: Any) -> Any:
    if hint is str:
        return "dashboards-test"
    if inspect.isclass(hint):
        return hint()  # a config model: its defaults
    raise TypeError(f"{cls.__qualname__}({name}: {hint!r}): no way to build this argument; teach catalog.py")


def _instantiate(cls: type, registry: CollectorRegistry) -> list[MetricWrapperBase] | None:
    """The class's metric objects, registered on `registry` (None: not a metrics class)."""
    params = inspect.signature(cls, eval_str=True).parameters
    if "registry" not in params:
        return None
    kwargs = {
        name: _argument(cls, name, p.annotation)
        for name, p in params.items()
        if name != "registry" and p.default is inspect.Parameter.empty
    }
    instance = cls(registry=registry, **kwargs)
    return [v for v in vars(instance).values() if isinstance(v, MetricWrapperBase)]


def _metrics_classes() -> Iterator[type]:
    for module_name in metrics_modules():
        module = importlib.import_module(module_name)
        classes = [c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == module_name]
        takes_registry = [c for c in classes if "registry" in inspect.signature(c).parameters]
        if not takes_registry:
            raise AssertionError(f"{module_name} defines no metrics class taking a registry")
        yield from takes_registry


def all_metrics(registry: CollectorRegistry) -> list[MetricWrapperBase]:
    """Every metric object of every metrics class, all registered on one registry."""
    return [w for cls in _metrics_classes() for w in _instantiate(cls, registry) or []]


def label_names(metric: MetricWrapperBase) -> tuple[str, ...]:
    # prometheus_client has no public accessor for a labelled metric's label names before a child exists.
    return tuple(metric._labelnames)


@cache
def defined_series() -> dict[str, frozenset[str]]:
    """{series name a query may use: its label names}, for every metric the code defines."""
    out: dict[str, frozenset[str]] = {}
    for cls in _metrics_classes():
        registry = CollectorRegistry()
        labels = {
            next(iter(w.describe())).name: frozenset(label_names(w))
            for w in _instantiate(cls, registry) or []
        }
        for family in registry.collect():
            for suffix in SUFFIXES[family.type]:
                extra = {"le"} if suffix == "_bucket" else set()
                out[family.name + suffix] = labels.get(family.name, frozenset()) | extra
    return out


def _grouping_labels(expr: str) -> set[str]:
    toks = tokens(expr)
    labels: set[str] = set()
    for i, (_, text) in enumerate(toks[:-1]):
        if text in ("by", "group_left") and toks[i + 1][1] == "(":
            j = i + 2
            while toks[j][1] != ")":
                if toks[j][0] == "ident":
                    labels.add(toks[j][1])
                j += 1
    return labels


@cache
def recording_rules() -> dict[str, frozenset[str]]:
    """{recorded series: its labels} from the rules file: the `by`/`group_left` labels of its
    expression plus those of the recording rules it reads."""
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "record" in r]
    out: dict[str, frozenset[str]] = {}
    for rule in rules:  # a rule only reads rules recorded above it
        inherited = set().union(*(out.get(name, frozenset()) for name in metric_names(rule["expr"])))
        # histogram_quantile consumes `le`
        out[rule["record"]] = frozenset((_grouping_labels(rule["expr"]) | inherited) - {"le"})
    return out


def known_series() -> dict[str, frozenset[str]]:
    return {**defined_series(), **recording_rules(), **PROMETHEUS_SERIES}
