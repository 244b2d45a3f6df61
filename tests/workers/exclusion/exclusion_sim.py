"""The simulator's exclusion scenario and its ground truth, in the worker's terms.

The simulator knows the true gold of every query and computes the false-exclusion
definition (docs/architecture.md) over the candidates it puts in the sample (its manifest). Its
scores put gold in 0.80-0.96 and everything else below 0.78, so a proxy
threshold of 0.78 must recover exactly the entitled gold: every count of the
worker, per tenant, variant, intent and source, must equal the truth.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from service.simulate.ledger import Ledger
from service.simulate.manifest import build_manifest
from service.simulate.records import LabelFacts, SimEvent, TraceFacts
from service.simulate.scenario import Scenario, parse_scenario
from service.simulate.stream import generate_events
from service.simulate.topics import INTENTS
from tests.support.decoded import decoded_event
from workers.exclusion.views import VIEWS
from workers.runtime.types import Event

WORKER_CONFIG = {"proxy_score_threshold": 0.78, "proxy_top_k": 10, "intents": list(INTENTS)}

COUNTS = (
    "samples",
    "eligible_queries",
    "falsely_excluded_queries",
    "eligible_gold_documents",
    "excluded_gold_documents",
)
TRUTH = ("queries", "eligible_queries", "excluded_queries", "eligible_gold_docs", "excluded_gold_docs")
# Which evaluations the worker runs for a trace, by where the simulator says its gold comes from.
SOURCES_BY_GOLD = {"proxy": ("proxy",), "label": ("proxy", "labels"), "sample": ("labels",)}


def incident_scenario() -> Scenario:
    return parse_scenario(
        {
            "name": "exclusion-incident",
            "seed": 7,
            "duration_s": 360,
            "rate": 5,
            "tenants": ["acme", "globex"],
            "candidate": {"name": "rerank-v2", "share": 0.2},
            "sampling": {"exclusion_sample": 0.6, "label": 0.3},
            "incidents": [
                {"kind": "entitlement_leak", "name": "leak", "share": 0.3, "start_s": 60, "end_s": 120},
                {
                    "kind": "filter_regression",
                    "name": "filter-regression",
                    "field": "locale",
                    "start_s": 180,
                    "end_s": 360,
                },
            ],
        }
    )


def as_event(sim: SimEvent, anchor: datetime, offset: int) -> Event:
    stored = {
        "id": sim.id,
        "type": sim.type,
        "tenant": sim.tenant,
        "body": sim.body,
        "timestamp": anchor + timedelta(seconds=sim.at_s),
        "received_at": datetime.now(UTC),
    }
    return decoded_event(stored, VIEWS, topic=f"sim.{sim.type}", offset=offset)


def phase_of(sim: SimEvent) -> str | None:
    facts = sim.facts
    if isinstance(facts, TraceFacts):
        return facts.phase
    if isinstance(facts, LabelFacts):
        return facts.trace.phase
    return None  # feedback and releases are not for this worker


def generate(anchor: datetime) -> tuple[list[SimEvent], dict[str, Any]]:
    """The incident scenario's events in send order, and its manifest (the truth)."""
    scenario, ledger = incident_scenario(), Ledger()
    events = []
    for sim in generate_events(scenario, anchor):
        ledger.handed_out(sim)
        events.append(sim)
    return events, build_manifest(scenario, ledger, anchor, "generate", {})


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]  # as tests.support.workers.parse_metrics


def registry_samples(registry: CollectorRegistry) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in registry.collect()
        for s in family.samples
    }


def worker_counts(samples: Samples) -> dict[tuple[str, ...], tuple[int, ...]]:
    """COUNTS per (tenant, variant, intent, source)."""
    found: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0] * len(COUNTS))
    for (name, label_set), value in samples.items():
        metric = name.removeprefix("ragmon_exclusion_").removesuffix("_total")
        if name.endswith("_total") and metric in COUNTS:
            labels = dict(label_set)
            key = (labels["tenant"], labels["variant"], labels["intent"], labels["source"])
            found[key][COUNTS.index(metric)] += int(value)
    return {k: tuple(v) for k, v in found.items()}


def truth_counts(manifest: dict[str, Any], phases: Iterable[str]) -> dict[tuple[str, ...], tuple[int, ...]]:
    wanted = set(phases)
    expected: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0] * len(TRUTH))
    for row in manifest["exclusion"]["rows"]:
        if row["phase"] not in wanted:
            continue
        for source in SOURCES_BY_GOLD[row["gold_source"]]:
            key = (row["tenant"], row["variant"], row["intent"], source)
            expected[key] = [a + row[name] for a, name in zip(expected[key], TRUTH, strict=True)]
    return {k: tuple(v) for k, v in expected.items()}


def attributions(samples: Samples, source: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for (name, label_set), value in samples.items():
        labels = dict(label_set)
        if name == "ragmon_exclusion_predicate_exclusions_total" and labels["source"] == source:
            out[labels["field"]] += int(value)
    return out


def truth_attributions(manifest: dict[str, Any], phases: Iterable[str], source: str) -> Counter[str]:
    wanted, out = set(phases), Counter[str]()
    for row in manifest["exclusion"]["rows"]:
        if row["phase"] in wanted and source in SOURCES_BY_GOLD[row["gold_source"]]:
            out.update(row["excluded_by_field"])
    return out


def leaks(samples: Samples) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for (name, label_set), value in samples.items():
        if name == "ragmon_exclusion_leaks_total":
            labels = dict(label_set)
            out[(labels["tenant"], labels["kind"])] += int(value)
    return out


def production_rate(samples: Samples) -> float:
    """Falsely excluded / eligible queries of production (the incident leaves the shadow variant alone)."""
    excluded = eligible = 0
    for (_tenant, variant, _intent, _source), counts in worker_counts(samples).items():
        if variant == "production":
            excluded, eligible = excluded + counts[2], eligible + counts[1]
    return excluded / eligible
