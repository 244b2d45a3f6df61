"""ExclusionResultEvent per evaluated sample, for the scores topic (the shadow worker pairs them).

The event id is derived from the trace event and the gold source, so a
redelivered trace emits the same id and consumers deduplicate it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from service.contracts.scores import ExcludedGold, ExclusionResultEvent, exclusion_event_id, score_record
from workers.exclusion.evaluate import QueryOutcome
from workers.exclusion.plan import TracePlan
from workers.runtime.types import Emitter


def result_event(plan: TracePlan, outcome: QueryOutcome, leaked: int) -> ExclusionResultEvent:
    source_id = uuid.UUID(plan.event_id)
    return ExclusionResultEvent(
        event_id=exclusion_event_id(source_id, outcome.source),
        source_event_id=source_id,
        tenant=plan.tenant,
        trace_id=plan.trace_id,
        request_id=plan.request_id,
        variant=plan.variant,
        release=plan.release,
        intent=plan.intent,
        trace_timestamp=plan.timestamp,
        scored_at=datetime.now(UTC),
        gold_source=outcome.source,
        eligible_gold=len(outcome.eligible_gold),
        surviving_gold=len(outcome.eligible_gold) - len(outcome.excluded),
        falsely_excluded=outcome.falsely_excluded if outcome.eligible else None,
        excluded_gold=[
            ExcludedGold(doc_id=d, predicates=[f"{p.field} {p.op}" for p in refs])
            for d, refs in list(outcome.excluded.items())[:100]
        ],
        leaked=leaked,
    )


def emit_result(
    emitter: Emitter | None, topic: str, plan: TracePlan, outcome: QueryOutcome, leaked: int
) -> None:
    if emitter is None:
        return
    key, value, headers = score_record(result_event(plan, outcome, leaked))
    emitter.emit(topic, key, value, headers)
