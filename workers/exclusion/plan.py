"""Pure part of processing one event: what a trace or label asks the worker to do.

Everything that can be decided without Redis happens here (predicate
compilation, the entitlement check, evaluating the sample's candidates), so
bad input is rejected before any effect and the Redis round trips carry only
the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from service.contracts.ranking import ranking
from workers.exclusion.entitlement import count_verdicts
from workers.exclusion.evaluate import PreparedSample, ProxyGold, prepare_sample
from workers.exclusion.predicates import compile_predicates
from workers.exclusion.views import ExclusionLabel, ExclusionTrace
from workers.runtime.types import Event


@dataclass(frozen=True)
class TracePlan:
    event_id: str
    tenant: str
    trace_id: str
    variant: str
    intent: str | None
    sample: PreparedSample | None
    sample_gold: list[str] | None  # gold ids sent with the sample: source `labels`
    context_leaks: int
    context_unverified: int
    request_id: str = ""
    release: str | None = None
    timestamp: datetime = datetime.min.replace(tzinfo=UTC)
    # The ranked ids of the retrieval metrics (docs/retrieval-metrics.md), each id at its first place:
    # the sample's candidates in the app's order, and the context given to the generator.
    candidate_ids: tuple[str, ...] = ()
    context_ids: tuple[str, ...] = ()

    @property
    def has_effects(self) -> bool:
        return self.sample is not None or bool(self.context_leaks or self.context_unverified)


@dataclass(frozen=True)
class LabelPlan:
    event_id: str
    tenant: str
    trace_id: str
    gold_ids: list[str] | None  # None: a label about faithfulness only


def plan_trace(event: Event, proxy: ProxyGold) -> TracePlan:
    body = event.body_as(ExclusionTrace)
    retrieval = body.retrieval
    entitlement = compile_predicates(retrieval.filters.entitlement, "body.retrieval.filters.entitlement")
    leaks, unverified = count_verdicts([d.metadata for d in retrieval.documents], entitlement)
    # A failed request is no evidence about the filters' quality: its sample is not evaluated (never a false
    # exclusion, nor an eligible query). Its context's entitlement is still checked: a leaked document
    # reached the provider whether or not the call then failed.
    sample = retrieval.exclusion_sample if body.error is None else None
    prepared: PreparedSample | None = None
    candidate_ids: tuple[str, ...] = ()
    if sample is not None:
        candidate_ids = tuple(ranking(c.id for c in sample.candidates))
        # Relevance predicates only matter to the sample; without one they are not read.
        relevance = compile_predicates(retrieval.filters.relevance, "body.retrieval.filters.relevance")
        prepared = prepare_sample(sample.candidates, entitlement, relevance, proxy)
    return TracePlan(
        event_id=event.id,
        tenant=event.tenant,
        trace_id=body.trace_id,
        variant=body.variant,
        intent=body.intent,
        sample=prepared,
        sample_gold=list(sample.gold_ids) if sample is not None and sample.gold_ids is not None else None,
        context_leaks=leaks,
        context_unverified=unverified,
        request_id=body.request_id,
        release=body.release,
        timestamp=event.stored.timestamp,
        candidate_ids=candidate_ids,
        context_ids=tuple(ranking(d.id for d in retrieval.documents)),
    )


def plan_label(event: Event) -> LabelPlan:
    body = event.body_as(ExclusionLabel)
    gold = list(body.gold_ids) if body.gold_ids is not None else None
    return LabelPlan(event.id, event.tenant, body.trace_id, gold)
