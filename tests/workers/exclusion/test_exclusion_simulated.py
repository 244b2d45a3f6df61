"""The simulator's filter-regression incident through the processor, against its ground truth.

Fast: events go straight to process() (one processor per phase, so each
phase's counts are separate); the Kafka path is test_exclusion_end_to_end.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from tests.workers.exclusion.exclusion_sim import (
    WORKER_CONFIG,
    Samples,
    as_event,
    attributions,
    generate,
    leaks,
    phase_of,
    production_rate,
    registry_samples,
    truth_attributions,
    truth_counts,
    worker_counts,
)
from workers.exclusion.config import ExclusionConfig
from workers.exclusion.metrics import ExclusionMetrics
from workers.exclusion.processor import ExclusionProcessor
from workers.runtime.types import Event

PHASES = {"clean", "leak", "filter-regression"}


@pytest.fixture(scope="module")
def run(redis_url: str) -> tuple[dict[str, Samples], dict[str, Any]]:
    """The worker's metrics per phase, fed in send order in batches as a consumer would, and the truth."""
    anchor = datetime(2026, 3, 2, 12, tzinfo=UTC)
    events, manifest = generate(anchor)
    config = ExclusionConfig.model_validate(WORKER_CONFIG)
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    registries: dict[str, CollectorRegistry] = {}
    processors: dict[str, ExclusionProcessor] = {}
    mine = [(phase, sim) for sim in events if (phase := phase_of(sim)) is not None]
    for start in range(0, len(mine), 200):
        by_phase: dict[str, list[Event]] = defaultdict(list)
        for offset, (phase, sim) in enumerate(mine[start : start + 200], start):
            by_phase[phase].append(as_event(sim, anchor, offset))
        for phase, chunk in by_phase.items():
            if phase not in processors:
                registries[phase] = CollectorRegistry()
                processors[phase] = ExclusionProcessor(
                    client, ExclusionMetrics(registries[phase], config), config
                )
            assert processors[phase].process(chunk) == []
    client.close()
    return {phase: registry_samples(r) for phase, r in registries.items()}, manifest


def test_every_count_equals_the_simulator_truth(run: tuple[dict[str, Samples], dict[str, Any]]) -> None:
    by_phase, manifest = run
    assert set(by_phase) == PHASES
    for phase, samples in by_phase.items():
        assert worker_counts(samples) == truth_counts(manifest, [phase]), phase
        for source in ("proxy", "labels"):
            assert attributions(samples, source) == truth_attributions(manifest, [phase], source), (
                phase,
                source,
            )


def test_the_rate_rises_and_the_broken_predicate_is_blamed(
    run: tuple[dict[str, Samples], dict[str, Any]],
) -> None:
    by_phase, _ = run
    baseline, incident = production_rate(by_phase["clean"]), production_rate(by_phase["filter-regression"])
    assert baseline < 0.15 and incident > 0.9
    blamed = attributions(by_phase["filter-regression"], "proxy")
    assert blamed.most_common(1)[0][0] == "locale"
    assert blamed["locale"] > 10 * attributions(by_phase["clean"], "proxy")["locale"]


def test_leaks_equal_the_simulator_truth(run: tuple[dict[str, Samples], dict[str, Any]]) -> None:
    by_phase, manifest = run
    counted = sum((leaks(samples) for samples in by_phase.values()), start=leaks({}))
    expected = manifest["quality"]["leaks_by_tenant"]
    assert expected and all(n > 0 for n in expected.values())
    assert {tenant: counted[(tenant, "context")] for tenant in expected} == expected
    assert counted[("acme", "candidate")] == counted[("globex", "candidate")] == 0


def _recall(samples: Samples, stage: str, k: str = "10") -> tuple[float, float]:
    """Production's mean Recall@k over labelled traces at one stage, and its n."""
    total = n = 0.0
    for (name, label_set), value in samples.items():
        labels = dict(label_set)
        if labels.get("variant") != "production" or labels.get("stage") != stage:
            continue
        if name == "ragmon_exclusion_retrieval_score_sum_total" and (labels["metric"], labels["k"]) == (
            "recall",
            k,
        ):
            total += value
        elif name == "ragmon_exclusion_retrieval_labelled_traces_total":
            n += value
    return total / n, n


def test_the_filter_regression_drops_gold_from_the_context_not_from_the_candidates(
    run: tuple[dict[str, Samples], dict[str, Any]],
) -> None:
    """The broken relevance filter removes gold after retrieval: context recall falls while the candidates'
    recall (retrieved under the entitlement filters alone) stays: a drop, not a retriever miss. Measured:
    Recall@10 of the candidates 0.876 -> 0.910, of the context 0.834 -> 0.020 (n 238 and 328)."""
    by_phase, _ = run
    clean_candidates, n_clean = _recall(by_phase["clean"], "candidates")
    incident_candidates, n_incident = _recall(by_phase["filter-regression"], "candidates")
    clean_context, _ = _recall(by_phase["clean"], "context")
    incident_context, _ = _recall(by_phase["filter-regression"], "context")
    assert n_clean >= 30 and n_incident >= 30
    assert abs(incident_candidates - clean_candidates) < 0.1
    assert incident_context < clean_context - 0.3, (clean_context, incident_context)


def _totals(samples: Samples, prefix: str, by: str) -> dict[tuple[str, str, str], float]:
    """(stage, group value, what) -> total over the other labels, for one family group."""
    out: dict[tuple[str, str, str], float] = defaultdict(float)
    for (name, label_set), value in samples.items():
        labels = dict(label_set)
        if name == f"{prefix}labelled_traces_total":
            out[(labels["stage"], labels[by], "n")] += value
        elif name == f"{prefix}score_sum_total" and (labels["metric"], labels["k"]) == ("recall", "10"):
            out[(labels["stage"], labels[by], "recall@10")] += value
    return out


def test_retrieval_by_release_counts_the_same_traces_as_by_intent(
    run: tuple[dict[str, Samples], dict[str, Any]],
) -> None:
    """Each labelled trace is counted once per intent and once per release (its own release label, none when
    it named none): grouped the other way, the totals are equal."""
    by_phase, _ = run
    for phase, samples in by_phase.items():
        by_release = _totals(samples, "ragmon_exclusion_retrieval_release_", "release")
        by_intent = _totals(samples, "ragmon_exclusion_retrieval_", "intent")

        def summed(totals: dict[tuple[str, str, str], float]) -> dict[tuple[str, str], float]:
            out: dict[tuple[str, str], float] = defaultdict(float)
            for (stage, _, what), v in totals.items():
                out[(stage, what)] += v
            return dict(out)

        assert summed(by_release) == pytest.approx(summed(by_intent)), phase
        assert summed(by_release)[("context", "n")] > 0, phase
        releases = {release for _, release, _ in by_release}
        assert releases and "other" not in releases, (phase, releases)
