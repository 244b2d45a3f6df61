"""Online retrieval metrics of the exclusion worker against a real Redis (docs/retrieval-metrics.md).

Each counted value is checked against service/contracts/ranking.py on the same hand-made lists, and by hand
where the case is about ranking (repeated ids, entitlement)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from service.contracts.ranking import gold_set, trace_metrics
from tests.workers.exclusion.exclusion_events import candidate, label, trace
from workers.exclusion.config import ExclusionConfig
from workers.exclusion.processor import ExclusionProcessor
from workers.exclusion.retrieval import series_keys
from workers.exclusion.state import sample_key

MakeProcessor = Callable[..., ExclusionProcessor]
KS = (5, 10)
GROUP = {"tenant": "acme", "variant": "production", "intent": "billing"}
# The retriever ranks g2 third; the packer keeps x and g1 (not g2) for the generator.
CANDIDATES = [
    candidate("x", "en-US"),
    candidate("g1", "en-GB"),
    candidate("g2", "en-US"),
    candidate("y", "en-US"),
]
CONTEXT = [{"id": "x", "text": "", "metadata": {"tenant": "acme"}}, {"id": "g1", "text": "", "metadata": {}}]


def doc(doc_id: str) -> dict[str, Any]:
    return {"id": doc_id, "text": "", "metadata": {"tenant": "acme"}}


def n(registry: CollectorRegistry, stage: str) -> float | None:
    return registry.get_sample_value(
        "ragmon_exclusion_retrieval_labelled_traces_total", {**GROUP, "stage": stage}
    )


def value(registry: CollectorRegistry, stage: str, metric: str, k: str, which: str = "sum") -> float | None:
    name = "score_sum_total" if which == "sum" else "score_squares_total"
    labels = {**GROUP, "stage": stage, "metric": metric, "k": k}
    return registry.get_sample_value(f"ragmon_exclusion_retrieval_{name}", labels)


def counted(registry: CollectorRegistry, stage: str) -> dict[tuple[str, str], float | None]:
    return {(m, k): value(registry, stage, m, k) for m, k in series_keys(KS)}


def expected(retrieved: list[str], context: list[str], gold: list[str], barred: tuple[str, ...] = ()) -> Any:
    scores = trace_metrics(retrieved, context, gold_set(gold, barred), KS)
    assert scores is not None and scores.retrieved is not None and scores.context is not None
    out = {}
    for stage, stage_scores in (("candidates", scores.retrieved), ("context", scores.context)):
        out[stage] = {(m, k): stage_scores[f"{m}@{k}" if k != "all" else "mrr"] for m, k in series_keys(KS)}
    return out


def test_config_default_ks_are_5_and_10() -> None:
    assert ExclusionConfig().retrieval_ks == [5, 10]
    with pytest.raises(ValueError, match="retrieval_ks"):
        ExclusionConfig.model_validate({"retrieval_ks": [0, 5]})


def test_gold_sent_with_the_sample_scores_both_stages_as_ranking_does(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    make_processor().process([trace("t1", candidates=CANDIDATES, gold_ids=["g1", "g2"], documents=CONTEXT)])
    want = expected(["x", "g1", "g2", "y"], ["x", "g1"], ["g1", "g2"])
    assert counted(registry, "candidates") == pytest.approx(want["candidates"])
    assert counted(registry, "context") == pytest.approx(want["context"])
    # By hand: both gold among the candidates (ranks 2, 3); only g1 in the context (rank 2): a packer drop.
    assert value(registry, "candidates", "recall", "5") == 1.0
    assert value(registry, "context", "recall", "5") == 0.5
    assert value(registry, "context", "mrr", "all") == 0.5
    assert value(registry, "context", "recall", "5", "squares") == 0.25
    assert n(registry, "candidates") == n(registry, "context") == 1


def test_late_label_counts_once_and_redelivery_does_not_recount(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    proc = make_processor()
    proc.process([trace("t1", candidates=CANDIDATES, documents=CONTEXT)])  # proxy gold only
    assert n(registry, "candidates") is None  # proxy gold is not gold for these metrics
    late = label("t1", ["g2"])
    proc.process([late])
    proc.process([late])  # redelivered
    proc.process([label("t1", ["y"])])  # a second review of the same trace
    make_processor(own_registry=CollectorRegistry()).process([late])  # another worker process
    want = expected(["x", "g1", "g2", "y"], ["x", "g1"], ["g2"])
    assert counted(registry, "candidates") == pytest.approx(want["candidates"])
    assert value(registry, "candidates", "mrr", "all") == pytest.approx(1 / 3)
    assert value(registry, "context", "hit", "10") == 0.0  # the retriever found it, the packer dropped it
    assert n(registry, "candidates") == n(registry, "context") == 1


def test_label_before_its_trace_and_a_redelivered_batch_count_once(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    proc = make_processor()
    proc.process([label("t1", ["g1"])])
    batch = [
        trace("t1", candidates=CANDIDATES, documents=CONTEXT),
        trace("t2", candidates=CANDIDATES, gold_ids=["y"]),
    ]
    proc.process(batch)
    proc.process(batch)  # the same batch again (a redelivery after it succeeded)
    make_processor(own_registry=CollectorRegistry()).process(batch)  # or consumed by another process
    assert n(registry, "candidates") == 2
    # t1: g1 at rank 2 of both lists; t2: y at rank 4 of the candidates, nowhere in t2's (empty) context.
    assert value(registry, "candidates", "mrr", "all") == pytest.approx(0.5 + 0.25)
    assert value(registry, "candidates", "mrr", "all", "squares") == pytest.approx(0.25 + 0.0625)
    assert value(registry, "context", "recall", "10") == pytest.approx(1.0 + 0.0)


def test_a_repeated_id_counts_at_its_first_place(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    repeated = [candidate("x", "en-US"), candidate("x", "en-US"), candidate("g1", "en-US")]
    context = [doc("g1"), doc("g1"), doc("x")]
    make_processor().process([trace("t1", candidates=repeated, gold_ids=["g1"], documents=context)])
    assert value(registry, "candidates", "mrr", "all") == 0.5  # x, g1: not x, x, g1
    assert value(registry, "context", "precision", "5") == pytest.approx(1 / 5)  # g1 once, not twice
    assert counted(registry, "candidates") == pytest.approx(
        expected(["x", "g1"], ["g1", "x"], ["g1"])["candidates"]
    )


def test_no_entitled_gold_is_not_counted_and_not_entitled_gold_is_left_out(
    make_processor: MakeProcessor, registry: CollectorRegistry
) -> None:
    barred = [candidate("s", "en-US", tenant="initech"), candidate("g1", "en-US"), candidate("x", "en-US")]
    proc = make_processor()
    proc.process([trace("t0", candidates=barred, gold_ids=["s"])])  # its only gold is not entitled
    assert n(registry, "candidates") is None
    assert value(registry, "candidates", "recall", "5") is None
    proc.process([trace("t1", candidates=barred, gold_ids=["s", "g1", "missing"])])
    # s is out of both sides but keeps its rank 1; "missing" was never retrieved: a miss, in the denominator.
    assert value(registry, "candidates", "recall", "5") == 0.5
    assert value(registry, "candidates", "mrr", "all") == 0.5
    want = expected(["s", "g1", "x"], [], ["s", "g1", "missing"], barred=("s",))
    assert counted(registry, "candidates") == pytest.approx(want["candidates"])
    assert n(registry, "candidates") == 1


def test_an_entry_of_the_older_layout_counts_for_exclusions_only(
    make_processor: MakeProcessor, registry: CollectorRegistry, redis_client: Any
) -> None:
    redis_client.set(
        sample_key("acme", "t1"),
        b'{"v": 1, "variant": "production", "intent": "billing", "predicates": [], "failures": {"g1": []},'
        b' "not_entitled": []}',
    )
    make_processor().process([label("t1", ["g1"])])
    labels = {**GROUP, "source": "labels"}
    assert registry.get_sample_value("ragmon_exclusion_eligible_queries_total", labels) == 1
    assert n(registry, "candidates") is None
