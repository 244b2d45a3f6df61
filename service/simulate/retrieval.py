"""Filters, retrieval under entitlement, and the false-exclusion ground truth.

The candidates are what the app's retriever returns under the entitlement
filters alone (what `retrieval.exclusion_sample` carries); the context is the
best candidates that also pass the relevance predicates. The truth is
computed here from the generator's own knowledge of gold, by evaluating the
same predicates it sends, so tests can compare a worker's counts with it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from service.simulate.corpus import Doc, TenantCorpus, User
from service.simulate.incidents import FilterRegression
from service.simulate.topics import LOCALES, PRODUCTS, RECENCY_INTENTS, Topic

# Score bands: gold clears 0.78, nothing else reaches it, so a worker's proxy
# threshold of 0.75-0.78 recovers exactly the entitled gold.
GOLD_SCORES = (0.80, 0.96)
SAME_TOPIC_SCORES = (0.55, 0.74)
SAME_INTENT_SCORES = (0.35, 0.60)
UNRELATED_SCORES = (0.05, 0.35)
SAME_INTENT_DEPTH = 6


@dataclass(frozen=True)
class Scored:
    doc: Doc
    score: float


@dataclass
class ExclusionTruth:
    """Filter false exclusion (docs/architecture.md, "Definitions") for one query, over the sample's candidates."""

    eligible_gold: int = 0
    excluded_gold: int = 0
    ineligible_gold: int = 0
    excluded_by_field: dict[str, int] = field(default_factory=dict)

    @property
    def has_eligible_gold(self) -> bool:
        return self.eligible_gold > 0

    @property
    def excluded_query(self) -> bool:
        return self.eligible_gold > 0 and self.excluded_gold == self.eligible_gold


def entitlement_filters(user: User) -> list[dict[str, Any]]:
    return [
        {"field": "tenant", "op": "eq", "value": user.tenant},
        {"field": "access_group", "op": "in", "value": list(user.groups)},
    ]


def relevance_filters(
    rng: random.Random, user: User, intent: str, cutoff: str, future: str, broken: FilterRegression | None
) -> list[dict[str, Any]]:
    """The app's relevance predicates; a filter regression corrupts the value of its field."""
    breaks = broken is not None and rng.random() < broken.share
    field_name = broken.field if broken is not None and breaks else None
    locale = user.locale
    products = list(user.products)
    if field_name == "locale":
        locale = LOCALES[(LOCALES.index(user.locale) + 1) % len(LOCALES)]
    elif field_name == "product":
        products = [next(p for p in PRODUCTS if p not in user.products)]
    preds: list[dict[str, Any]] = [
        {"field": "locale", "op": "eq", "value": locale},
        {"field": "product", "op": "in", "value": products},
    ]
    if field_name == "updated_at":
        # A date after every document: the recency predicate removes everything.
        preds.append({"field": "updated_at", "op": "gte", "value": future})
    elif intent in RECENCY_INTENTS:
        preds.append({"field": "updated_at", "op": "gte", "value": cutoff})
    return preds


def passes(pred: dict[str, Any], metadata: dict[str, Any]) -> bool:
    """Our own evaluation of a predicate (ISO dates of one format compare as strings)."""
    op, want = pred["op"], pred.get("value")
    if op == "exists":
        return (pred["field"] in metadata) == (want is not False)
    if pred["field"] not in metadata:
        return op in ("neq", "not_in")
    have = metadata[pred["field"]]
    if op == "eq":
        return bool(have == want)
    if op == "neq":
        return bool(have != want)
    if op == "in":
        return have in (want or ())
    if op == "not_in":
        return have not in (want or ())
    if op == "gte":
        return bool(have >= want)
    if op == "gt":
        return bool(have > want)
    if op == "lte":
        return bool(have <= want)
    if op == "lt":
        return bool(have < want)
    raise ValueError(f"unknown predicate op {op!r}")


def passes_all(preds: list[dict[str, Any]], metadata: dict[str, Any]) -> bool:
    return all(passes(p, metadata) for p in preds)


def _band(rng: random.Random, band: tuple[float, float]) -> float:
    return round(rng.uniform(*band), 4)


def retrieve_candidates(
    rng: random.Random,
    tc: TenantCorpus,
    user: User,
    product: str | None,
    topic: Topic | None,
    gold_ids: set[str],
    depth: int,
) -> list[Scored]:
    """Top `depth` entitled documents by score (entitlement filters only)."""
    scores: dict[str, tuple[Doc, float]] = {}

    def offer(doc: Doc, band: tuple[float, float]) -> None:
        if doc.id not in scores and doc.access_group in user.groups:
            scores[doc.id] = (doc, _band(rng, GOLD_SCORES if doc.id in gold_ids else band))

    if topic is not None:
        for p in tc.products:
            for doc in tc.by_key.get((p, topic.name), ()):
                offer(doc, SAME_TOPIC_SCORES)
        same_intent = tc.by_intent.get(topic.intent, [])
        for doc in rng.sample(same_intent, min(len(same_intent), SAME_INTENT_DEPTH)):
            offer(doc, SAME_INTENT_SCORES)
    for doc in rng.sample(tc.docs, min(len(tc.docs), depth + 8)):
        if len(scores) >= depth + 4:
            break
        offer(doc, UNRELATED_SCORES)
    ranked = sorted(scores.values(), key=lambda item: (-item[1], item[0].id))
    return [Scored(doc, score) for doc, score in ranked[:depth]]


def exclusion_truth(
    candidates: list[Scored], gold: list[Doc], user: User, relevance: list[dict[str, Any]]
) -> ExclusionTruth:
    truth = ExclusionTruth()
    gold_ids = {d.id for d in gold}
    truth.ineligible_gold = sum(1 for d in gold if d.access_group not in user.groups)
    for cand in candidates:
        if cand.doc.id not in gold_ids:
            continue
        truth.eligible_gold += 1
        failing = [p["field"] for p in relevance if not passes(p, cand.doc.metadata)]
        if failing:
            truth.excluded_gold += 1
            for name in failing:
                truth.excluded_by_field[name] = truth.excluded_by_field.get(name, 0) + 1
    return truth


def survivors(candidates: list[Scored], relevance: list[dict[str, Any]], limit: int) -> list[Scored]:
    """The best `limit` candidates that pass every relevance predicate, in score order."""
    out: list[Scored] = []
    for cand in candidates:
        if passes_all(relevance, cand.doc.metadata):
            out.append(cand)
            if len(out) == limit:
                break
    return out


def candidate_payload(candidates: list[Scored]) -> list[dict[str, Any]]:
    return [{"id": c.doc.id, "score": c.score, "metadata": dict(c.doc.metadata)} for c in candidates]
