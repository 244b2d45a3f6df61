"""Filter false exclusion, per query and per gold document (docs/architecture.md, "Definitions").

Per query: eligible gold = gold ∩ entitled candidates; survivors = eligible
candidates that pass every relevance predicate. The query is falsely
excluded when it has eligible gold and none of it survives; each eligible
gold document that does not survive is a document-level exclusion, blamed on
the predicates it fails.

The gold set is fixed *before* filtering and never rebuilt from survivors:
an evaluator that intersects gold with the survivors drops exactly the
queries the filter broke and reports 100% (an invalid evaluator that always looks perfect).
For the same reason the proxy gold (top-scored candidates) is chosen among
all eligible candidates, not among the survivors.

Gold outside the sample is left out of both numerator and denominator: a
candidate that violates an entitlement predicate is not a false exclusion
(it is a leak, counted elsewhere), and a gold id that the entitlement-only
retrieval did not return has no metadata to evaluate (a recall problem, not
a filter one). Both are counted so that their share stays visible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from workers.exclusion.entitlement import LEAK, UNVERIFIED, entitlement_verdict
from workers.exclusion.predicates import CompiledPredicate, PredicateRef

GoldSource = Literal["labels", "proxy"]
SOURCES: tuple[GoldSource, ...] = ("labels", "proxy")


@dataclass(frozen=True)
class ProxyGold:
    """Without labels, gold is approximated by the best-scored eligible candidates."""

    threshold: float
    top_k: int

    def select(self, scored: Sequence[tuple[float, str]]) -> tuple[str, ...]:
        cleared = [(score, doc_id) for score, doc_id in scored if score >= self.threshold]
        cleared.sort(key=lambda pair: -pair[0])  # stable: equal scores keep retrieval order
        return tuple(doc_id for _, doc_id in cleared[: self.top_k])


@dataclass(frozen=True)
class PreparedSample:
    """What the evaluation needs of one exclusion sample (and all a late label needs).

    `failures` maps each eligible candidate to the indexes of the relevance
    predicates it fails (empty: it survives); it holds no metadata values.
    """

    predicates: tuple[PredicateRef, ...]
    failures: Mapping[str, tuple[int, ...]]
    not_entitled: frozenset[str]
    proxy_gold: tuple[str, ...] = ()
    leaked: int = 0
    unverified: int = 0


def prepare_sample(
    candidates: Iterable[Any],
    entitlement: Sequence[CompiledPredicate],
    relevance: Sequence[CompiledPredicate],
    proxy: ProxyGold,
) -> PreparedSample:
    """Evaluate every predicate on every candidate once (candidates: id, score, metadata)."""
    failures: dict[str, tuple[int, ...]] = {}
    not_entitled: set[str] = set()
    scored: list[tuple[float, str]] = []
    leaked = unverified = 0
    for candidate in candidates:
        doc_id, metadata = candidate.id, candidate.metadata
        if entitlement:
            verdict = entitlement_verdict(metadata, entitlement)
            if verdict == LEAK:
                leaked += 1
                not_entitled.add(doc_id)
                continue
            unverified += verdict == UNVERIFIED
        if doc_id in failures:
            continue  # a repeated id keeps its first occurrence, as a ranked list would
        failures[doc_id] = failing_predicates(metadata, relevance)
        if candidate.score is not None:
            scored.append((candidate.score, doc_id))
    return PreparedSample(
        predicates=tuple(p.ref for p in relevance),
        failures=failures,
        not_entitled=frozenset(not_entitled - failures.keys()),
        proxy_gold=proxy.select(scored),
        leaked=leaked,
        unverified=unverified,
    )


def failing_predicates(
    metadata: Mapping[str, Any], predicates: Sequence[CompiledPredicate]
) -> tuple[int, ...]:
    """Indexes of the predicates the metadata fails (CompiledPredicate.matches, inlined:
    this is the worker's innermost loop, candidates x predicates per sample)."""
    failed: list[int] = []
    for i, predicate in enumerate(predicates):
        value = metadata.get(predicate.field)
        if value is None or value == []:
            if not predicate.if_missing:
                failed.append(i)
        elif not predicate.test(value):
            failed.append(i)
    return tuple(failed)


@dataclass(frozen=True)
class QueryOutcome:
    source: GoldSource
    eligible_gold: tuple[str, ...]
    excluded: Mapping[str, tuple[PredicateRef, ...]]  # eligible gold id -> predicates that removed it
    not_entitled: int = 0  # gold ids that violate an entitlement predicate
    not_in_sample: int = 0  # gold ids the entitlement-only retrieval did not return

    @property
    def eligible(self) -> bool:
        return bool(self.eligible_gold)

    @property
    def falsely_excluded(self) -> bool:
        return self.eligible and len(self.excluded) == len(self.eligible_gold)


def evaluate(sample: PreparedSample, gold_ids: Iterable[str], source: GoldSource) -> QueryOutcome:
    eligible: list[str] = []
    not_entitled = not_in_sample = 0
    for doc_id in dict.fromkeys(gold_ids):  # a repeated gold id is one document
        if doc_id in sample.failures:
            eligible.append(doc_id)
        elif doc_id in sample.not_entitled:
            not_entitled += 1
        else:
            not_in_sample += 1
    excluded = {
        doc_id: tuple(sample.predicates[i] for i in sample.failures[doc_id])
        for doc_id in eligible
        if sample.failures[doc_id]
    }
    return QueryOutcome(source, tuple(eligible), excluded, not_entitled, not_in_sample)


class NoEligibleEvidence(ValueError):
    """An exclusion rate over nothing: missing evidence, never a reassuring 0%."""


@dataclass(frozen=True)
class ExclusionRate:
    excluded: int
    eligible: int

    @property
    def value(self) -> float:
        return self.excluded / self.eligible


def false_exclusion_rate(outcomes: Iterable[QueryOutcome]) -> ExclusionRate:
    """Queries whose eligible gold was all filtered out / queries with eligible gold."""
    eligible = excluded = 0
    for outcome in outcomes:
        if outcome.eligible:
            eligible += 1
            excluded += outcome.falsely_excluded
    if not eligible:
        raise NoEligibleEvidence("false-exclusion rate needs queries with eligible gold")
    return ExclusionRate(excluded, eligible)


def document_exclusion_rate(outcomes: Iterable[QueryOutcome]) -> ExclusionRate:
    """Eligible gold documents filtered out / eligible gold documents (shows partial losses)."""
    eligible = excluded = 0
    for outcome in outcomes:
        eligible += len(outcome.eligible_gold)
        excluded += len(outcome.excluded)
    if not eligible:
        raise NoEligibleEvidence("document exclusion rate needs eligible gold documents")
    return ExclusionRate(excluded, eligible)
