"""The false-exclusion computation, on the worked example of docs/architecture.md ("Definitions") and beyond."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from service.contracts import Candidate, Predicate
from workers.exclusion.evaluate import (
    NoEligibleEvidence,
    PreparedSample,
    ProxyGold,
    QueryOutcome,
    document_exclusion_rate,
    evaluate,
    false_exclusion_rate,
    prepare_sample,
)
from workers.exclusion.predicates import PredicateRef, compile_predicates

NO_PROXY = ProxyGold(threshold=1.0, top_k=1)

# The worked example (docs/architecture.md): six documents, one of them (d3) belonging to another tenant.
SEED_DOCS = [
    Candidate(id="d1", metadata={"tenant": "acme", "locale": "en-US"}),
    Candidate(id="d2", metadata={"tenant": "acme", "locale": "en-GB"}),
    Candidate(id="d3", metadata={"tenant": "globex", "locale": "en-US"}),
    Candidate(id="d4", metadata={"tenant": "acme", "locale": "en-US"}),
    Candidate(id="d5", metadata={"tenant": "acme", "locale": "de-DE"}),
    Candidate(id="d6", metadata={"tenant": "acme", "locale": "fr-FR"}),
]
ENTITLED = compile_predicates([Predicate(field="tenant", op="eq", value="acme")], "entitlement")


def relevance(field: str, value: str) -> list[Predicate]:
    return [Predicate(field=field, op="eq", value=value)]


SEED_QUERIES = [  # (gold ids, relevance predicates), as in the seed
    ({"d2"}, relevance("locale", "en-US")),  # gold in en-GB, filter forced en-US
    ({"d4"}, relevance("tenant", "acme")),
    ({"d6"}, relevance("locale", "en-US")),  # gold in fr-FR, filter forced en-US
    ({"d5"}, relevance("locale", "de-DE")),
]
UNAUTHORIZED_ONLY = ({"d3"}, relevance("locale", "en-US"))


def seed_outcome(
    gold: set[str], predicates: list[Predicate], candidates: list[Candidate] = SEED_DOCS
) -> QueryOutcome:
    sample = prepare_sample(candidates, ENTITLED, compile_predicates(predicates, "relevance"), NO_PROXY)
    return evaluate(sample, sorted(gold), "labels")


def test_seed_worked_example_is_50_percent_of_4_eligible_queries() -> None:
    outcomes = [seed_outcome(gold, preds) for gold, preds in SEED_QUERIES]
    rate = false_exclusion_rate(outcomes)
    assert (rate.value, rate.eligible, rate.excluded) == (0.5, 4, 2)
    assert [o.falsely_excluded for o in outcomes] == [True, False, True, False]
    assert outcomes[0].excluded == {"d2": (PredicateRef("locale", "eq"),)}


@pytest.mark.parametrize("in_sample", [True, False])
def test_unauthorized_only_gold_changes_neither_rate_nor_denominator(in_sample: bool) -> None:
    # d3 belongs to globex: whether the entitlement-only retrieval returned it (a leak)
    # or not, it is no false exclusion.
    candidates = SEED_DOCS if in_sample else [d for d in SEED_DOCS if d.id != "d3"]
    outcomes = [seed_outcome(g, p, candidates) for g, p in [*SEED_QUERIES, UNAUTHORIZED_ONLY]]
    rate = false_exclusion_rate(outcomes)
    assert (rate.value, rate.eligible) == (0.5, 4)
    extra = outcomes[-1]
    assert not extra.eligible and not extra.falsely_excluded
    assert (extra.not_entitled, extra.not_in_sample) == ((1, 0) if in_sample else (0, 1))


@pytest.mark.parametrize("queries", [[], [UNAUTHORIZED_ONLY]])
def test_no_eligible_queries_yields_no_rate(queries: list[tuple[set[str], list[Predicate]]]) -> None:
    outcomes = [seed_outcome(g, p) for g, p in queries]
    with pytest.raises(NoEligibleEvidence):
        false_exclusion_rate(outcomes)
    with pytest.raises(NoEligibleEvidence):
        document_exclusion_rate(outcomes)


def invalid_recall_over_filtered_gold(
    queries: Sequence[tuple[set[str], Callable[[dict[str, Any]], Any]]],
) -> float:
    """The invalid evaluator: gold is rebuilt from the survivors, so the
    queries the filter broke drop out of the denominator."""
    eligible = [d for d in SEED_DOCS if d.metadata["tenant"] == "acme"]
    recalls = []
    for gold, keep in queries:
        survivors = {d.id for d in eligible if keep(dict(d.metadata))}
        filtered_gold = gold & survivors
        if filtered_gold:
            recalls.append(len(filtered_gold & survivors) / len(filtered_gold))
    return sum(recalls) / len(recalls)


def test_regression_guard_against_the_seed_invalid_evaluator() -> None:
    as_lambdas = [(gold, lambda m, p=preds[0]: m.get(p.field) == p.value) for gold, preds in SEED_QUERIES]
    assert invalid_recall_over_filtered_gold(as_lambdas) == 1.0  # the mistake, reproduced
    outcomes = [seed_outcome(gold, preds) for gold, preds in SEED_QUERIES]
    # Our denominator keeps the queries whose gold the filter removed...
    assert false_exclusion_rate(outcomes).eligible == 4
    # ...so recall over the fixed eligible gold is the correct 50%, not 100%.
    recalls = [1 - len(o.excluded) / len(o.eligible_gold) for o in outcomes]
    assert sum(recalls) / len(recalls) == 0.5


def test_denominator_does_not_depend_on_the_relevance_filter() -> None:
    # Tighten the filter until it removes everything: the denominator stays put.
    for predicates in ([], relevance("locale", "en-US"), relevance("locale", "xx-XX")):
        outcomes = [seed_outcome(gold, predicates) for gold, _ in SEED_QUERIES]
        assert false_exclusion_rate(outcomes).eligible == 4
    everything_removed = [seed_outcome(gold, relevance("locale", "xx-XX")) for gold, _ in SEED_QUERIES]
    assert false_exclusion_rate(everything_removed).value == 1.0


def test_multi_gold_partial_exclusion_is_document_level_only() -> None:
    both = [Predicate(field="locale", op="eq", value="en-US"), Predicate(field="tenant", op="neq", value="x")]
    partial = seed_outcome({"d1", "d2", "d6"}, both)  # d1 survives, d2 and d6 are removed
    total = seed_outcome({"d2"}, both)
    assert not partial.falsely_excluded and partial.eligible_gold == ("d1", "d2", "d6")
    assert set(partial.excluded) == {"d2", "d6"}
    assert false_exclusion_rate([partial, total]).value == 0.5
    doc_rate = document_exclusion_rate([partial, total])
    assert (doc_rate.excluded, doc_rate.eligible) == (3, 4)


def test_attribution_names_every_failing_predicate_by_field_and_op() -> None:
    predicates = [
        Predicate(field="locale", op="eq", value="en-US"),
        Predicate(field="updated", op="gte", value="2026-01-01"),
        Predicate(field="tenant", op="exists"),
    ]
    docs = [Candidate(id="g", metadata={"tenant": "acme", "locale": "de-DE", "updated": "2025-06-01"})]
    outcome = seed_outcome({"g"}, predicates, docs)
    assert outcome.excluded == {"g": (PredicateRef("locale", "eq"), PredicateRef("updated", "gte"))}
    assert "de-DE" not in repr(outcome) and "2026" not in repr(outcome)  # never the value


def scored(doc_id: str, score: float | None, locale: str) -> Candidate:
    return Candidate(id=doc_id, score=score, metadata={"tenant": "acme", "locale": locale})


def test_proxy_gold_is_chosen_before_filtering_and_capped() -> None:
    candidates = [
        scored("a", 0.95, "fr-FR"),
        scored("b", 0.90, "en-US"),
        scored("c", 0.99, "fr-FR"),
        scored("d", 0.85, "en-US"),
        scored("e", 0.20, "en-US"),
        scored("f", None, "en-US"),
    ]
    proxy = ProxyGold(threshold=0.8, top_k=2)
    sample = prepare_sample(
        candidates, ENTITLED, compile_predicates(relevance("locale", "en-US"), "r"), proxy
    )
    assert sample.proxy_gold == ("c", "a")  # the best two overall, not the best two survivors
    assert evaluate(sample, sample.proxy_gold, "proxy").falsely_excluded
    assert ProxyGold(threshold=0.99, top_k=3).select([(0.98, "x")]) == ()


def test_repeated_ids_count_once() -> None:
    docs = [scored("a", 0.9, "en-US"), scored("a", 0.9, "fr-FR")]
    sample = prepare_sample(docs, ENTITLED, compile_predicates(relevance("locale", "en-US"), "r"), NO_PROXY)
    outcome = evaluate(sample, ["a", "a"], "labels")
    assert outcome.eligible_gold == ("a",) and not outcome.excluded


def test_sample_records_leaks_and_unverified_candidates() -> None:
    docs = [*SEED_DOCS, Candidate(id="d7", metadata={"locale": "en-US"})]
    sample: PreparedSample = prepare_sample(docs, ENTITLED, (), NO_PROXY)
    assert (sample.leaked, sample.unverified) == (1, 1)
    assert sample.not_entitled == {"d3"} and "d7" in sample.failures
