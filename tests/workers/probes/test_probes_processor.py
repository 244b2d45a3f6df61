"""The probes worker on real PostgreSQL: baselines pinned per version, drops without a declared change,
declared changes re-pinned (also when the marker arrives after the replay), redelivery stored once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from service.contracts import Topics, reviewdb
from service.probes.store import Probe, add_probes
from tests.workers.probes.probe_events import at, probe_event, release_event, run
from workers.probes.config import ProbesConfig
from workers.probes.metrics import ProbesMetrics
from workers.probes.processor import NOT_A_PROBE, ProbesProcessor
from workers.probes.store import ProbeStore

pytestmark = pytest.mark.slow

BEFORE = {"q1": ["a", "b", "c"], "q2": ["d", "e", "f"]}
# q1 keeps a, c and b in another order (overlap 1, RBO 0.955 by hand, tests/service/contracts);
# q2 loses everything
WORSE = {"q1": ["a", "c", "b"], "q2": ["x", "y", "z"]}


@pytest.fixture
def proc(review_db_url: str) -> Iterator[tuple[ProbesProcessor, CollectorRegistry]]:
    store = ProbeStore(review_db_url, declare_grace_s=600)
    registry = CollectorRegistry()
    p = ProbesProcessor(ProbesConfig(k=3), ProbesMetrics(registry), store, Topics("t"))
    assert p.readiness().ready  # migrates
    with reviewdb.connect(review_db_url) as conn:
        add_probes(
            conn, "acme", [Probe("billing", "q1", "refund?", ["a", "z"]), Probe("billing", "q2", "vat?")]
        )
    yield p, registry
    p.close()


def _get(registry: CollectorRegistry, name: str, model: str = "emb-v1", index: str = "idx-1") -> Any:
    labels = {"tenant": "acme", "probe_set": "billing", "embedding_model": model, "index_version": index}
    return registry.get_sample_value(name, labels)


def test_first_run_is_the_baseline_and_a_stable_rerun_overlaps_fully(proc: Any) -> None:
    p, registry = proc
    assert p.process(run(p, at(0), BEFORE)) == []
    assert _get(registry, "ragmon_rag_probe_overlap_ratio") == 1.0
    assert _get(registry, "ragmon_rag_probe_rbo_ratio") == pytest.approx(1.0)
    assert _get(registry, "ragmon_rag_probe_compared_queries") == 2
    assert _get(registry, "ragmon_rag_probe_gold_recall_ratio") == 0.5  # q1 only: a of {a, z}
    p.process(run(p, at(60), BEFORE))
    assert _get(registry, "ragmon_rag_probe_overlap_ratio") == 1.0
    assert registry.get_sample_value("ragmon_rag_probe_stored_traces_total", {"tenant": "acme"}) == 4


def test_same_version_with_other_neighbours_drops(proc: Any) -> None:
    p, registry = proc
    p.process(run(p, at(0), BEFORE))
    p.process(run(p, at(60), WORSE))  # a provider changed the model behind the same name: no new version
    assert _get(registry, "ragmon_rag_probe_overlap_ratio") == 0.5  # (1 + 0) / 2
    assert _get(registry, "ragmon_rag_probe_rbo_ratio") == pytest.approx(0.955 / 2)


def test_an_undeclared_new_version_is_compared_with_the_old_baseline(proc: Any) -> None:
    p, registry = proc
    p.process(run(p, at(0), BEFORE))
    p.process(run(p, at(60), WORSE, model="emb-v2", index="idx-2"))
    # the series follows the serving version; the old one left /metrics
    assert _get(registry, "ragmon_rag_probe_overlap_ratio") is None
    assert _get(registry, "ragmon_rag_probe_overlap_ratio", "emb-v2", "idx-2") == 0.5
    assert _get(registry, "ragmon_rag_probe_compared_queries", "emb-v2", "idx-2") == 2


def test_a_declared_change_pins_the_new_version(proc: Any) -> None:
    p, registry = proc
    p.process(run(p, at(0), BEFORE))
    p.process([release_event(at(50))])
    p.process(run(p, at(60), WORSE, model="emb-v2", index="idx-2"))
    assert _get(registry, "ragmon_rag_probe_overlap_ratio", "emb-v2", "idx-2") == 1.0
    assert _get(registry, "ragmon_rag_probe_gold_recall_ratio", "emb-v2", "idx-2") == 0.5


@pytest.mark.parametrize(
    ("component", "declares"),
    [("embedding_model", True), ("index", True), ("generator_model", False), ("prompt", False)],
)
def test_only_an_index_side_component_declares_a_probe_change(
    proc: Any, component: str, declares: bool
) -> None:
    p, registry = proc
    p.process(run(p, at(0), BEFORE))
    p.process([release_event(at(50), component=component, from_="v1", to="v2")])
    p.process(run(p, at(60), WORSE, model="emb-v2", index="idx-2"))
    # declared: the new version is its own baseline; a generator or prompt change declares nothing,
    # so the new version is compared with the old baseline and its worse neighbours show
    assert _get(registry, "ragmon_rag_probe_overlap_ratio", "emb-v2", "idx-2") == (1.0 if declares else 0.5)


def test_a_release_consumed_after_the_replay_still_declares_it(proc: Any) -> None:
    p, registry = proc
    p.process(run(p, at(0), BEFORE))
    p.process(run(p, at(60), WORSE, model="emb-v2", index="idx-2"))
    assert _get(registry, "ragmon_rag_probe_overlap_ratio", "emb-v2", "idx-2") == 0.5
    p.process([release_event(at(59))])  # on the releases topic, consumed later than the probes
    assert _get(registry, "ragmon_rag_probe_overlap_ratio", "emb-v2", "idx-2") == 1.0


def test_a_release_long_after_the_version_appeared_declares_nothing(proc: Any) -> None:
    p, registry = proc
    p.process(run(p, at(0), BEFORE))
    p.process(run(p, at(60), WORSE, model="emb-v2", index="idx-2"))
    p.process([release_event(at(60 + 11))])  # past the 10 min grace: not the change that brought idx-2
    assert _get(registry, "ragmon_rag_probe_overlap_ratio", "emb-v2", "idx-2") == 0.5


def test_a_release_long_before_the_version_appeared_declares_nothing(proc: Any) -> None:
    p, registry = proc
    p.process(run(p, at(0), BEFORE))
    p.process([release_event(at(10))])  # a release of something else, the day before
    p.process(run(p, at(10 + 24 * 60 + 1), WORSE, model="emb-v2", index="idx-2"))
    assert _get(registry, "ragmon_rag_probe_overlap_ratio", "emb-v2", "idx-2") == 0.5


def test_redelivery_stores_once_and_candidates_do_not_move_production(proc: Any) -> None:
    p, registry = proc
    batch = run(p, at(0), BEFORE)
    p.process(batch)
    p.process(batch)
    cand = run(p, at(30), WORSE, variant="cand-idx", model="emb-v2", index="idx-2")
    p.process(cand)
    assert _get(registry, "ragmon_rag_probe_overlap_ratio") == 1.0
    with reviewdb.connect(p.store.url) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE variant <> 'production') FROM probe_result"
        )
        assert row.fetchone() == (4, 2)


def test_a_trace_without_its_mark_is_a_dead_letter(proc: Any) -> None:
    p, _ = proc
    event = probe_event(p, at(0), query_id="q1", ids=["a"])
    event.body.probe = None
    rejections = p.process([event])
    assert [(r.reason, r.detail) for r in rejections] == [("invalid_body", NOT_A_PROBE)]
