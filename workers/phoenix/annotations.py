"""Score events -> Phoenix annotations (pure; docs/phoenix.md has the table).

| score event | Phoenix annotation | on | identifier |
|---|---|---|---|
| faithfulness, per answer | span `ragmon.faithfulness` (faithful / unfaithful / no_claims) | root span | `ragmon-<mode>` |
| faithfulness, sentence mode | span `ragmon.faithfulness.sentence` per unsupported sentence | root span | `sentence-<i>` |
| exclusion result | span `ragmon.false_exclusion` (falsely_excluded / not_excluded / no_eligible_gold) | root span | `ragmon-<gold source>` |
| each excluded gold document | document `ragmon.excluded_gold` | the RETRIEVER span listing it | (none: Phoenix upserts on name, span, position) |

Phoenix upserts span annotations on (name, span, identifier), so exporting
the same score again (a redelivery, a replay, a re-score) replaces the
annotation instead of adding one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent

ANNOTATOR_KIND = "CODE"
FAITHFULNESS = "ragmon.faithfulness"
FAITHFULNESS_SENTENCE = "ragmon.faithfulness.sentence"
FALSE_EXCLUSION = "ragmon.false_exclusion"
EXCLUDED_GOLD = "ragmon.excluded_gold"
MAX_EXPLANATION = 4000  # characters; Phoenix stores any length, its UI does not need more

# Metric label values (closed set).
KINDS = ("faithfulness", "faithfulness_sentence", "false_exclusion", "excluded_document")

_TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")


def phoenix_trace_id(trace_id: str) -> str | None:
    """The OTLP trace id (32 lowercase hex) a ragmon trace id names, or None when it names none.

    Traces assembled from OTLP spans carry their OTLP trace id as the ragmon
    trace id (docs/otlp.md); a native trace whose app uses its OpenTelemetry
    trace id as `trace_id` matches the same way. Anything else has no trace in Phoenix.
    """
    if not _TRACE_ID.match(trace_id) or int(trace_id, 16) == 0:
        return None
    return trace_id.lower()


@dataclass(frozen=True)
class TraceSpans:
    """What Phoenix holds of one trace: its root span and where each retrieved document is listed."""

    root: str | None = None
    documents: dict[str, tuple[str, int]] = field(default_factory=dict)  # doc id -> (span id, position)


@dataclass(frozen=True)
class Planned:
    kind: str  # one of KINDS
    payload: dict[str, Any]


@dataclass
class Plan:
    spans: list[Planned] = field(default_factory=list)
    documents: list[Planned] = field(default_factory=list)
    documents_not_found: int = 0


def _clip(text: str) -> str:
    return text if len(text) <= MAX_EXPLANATION else text[: MAX_EXPLANATION - 1] + "…"


def _span_annotation(
    kind: str, name: str, span_id: str, identifier: str, result: dict[str, Any], metadata: dict[str, Any]
) -> Planned:
    if "explanation" in result:
        result = {**result, "explanation": _clip(result["explanation"])}
    return Planned(
        kind,
        {
            "name": name,
            "annotator_kind": ANNOTATOR_KIND,
            "span_id": span_id,
            "identifier": identifier,
            "result": result,
            "metadata": metadata,
        },
    )


def _common_metadata(event: FaithfulnessScoreEvent | ExclusionResultEvent) -> dict[str, Any]:
    return {
        "source": "ragmon",
        "score_event_id": str(event.event_id),
        "variant": event.variant,
        "release": event.release,
        "intent": event.intent,
        "scored_at": event.scored_at.isoformat(),
    }


def faithfulness_result(event: FaithfulnessScoreEvent) -> dict[str, Any]:
    if event.outcome == "no_claims":
        why = "the answer is a refusal" if event.no_claims_reason == "refused" else "the answer is empty"
        return {"label": "no_claims", "explanation": f"not scored: {why}, so it makes no claim to check"}
    label = "unfaithful" if event.below_threshold else "faithful"
    if event.mode == "answer":
        explanation = f"HHEM-2.1-Open P(consistent) = {event.score:.3f}; threshold {event.threshold:.3f}"
    else:
        explanation = (
            f"{event.sentences_supported}/{event.sentences_total} sentences supported "
            f"(each sentence's P(consistent) >= {event.threshold:.3f})"
        )
        if event.unsupported_sentences:
            explanation += "; unsupported: " + " | ".join(
                f"[{s.index}] {s.text} ({s.score:.3f})" for s in event.unsupported_sentences
            )
    return {"label": label, "score": event.score, "explanation": explanation}


def plan_faithfulness(event: FaithfulnessScoreEvent, root: str, plan: Plan) -> None:
    metadata = {
        **_common_metadata(event),
        "mode": event.mode,
        "threshold": event.threshold,
        "model_revision": event.model.revision,
    }
    if event.truncation is not None:
        metadata["truncation"] = event.truncation.model_dump()
    plan.spans.append(
        _span_annotation(
            "faithfulness", FAITHFULNESS, root, f"ragmon-{event.mode}", faithfulness_result(event), metadata
        )
    )
    for s in event.unsupported_sentences:
        plan.spans.append(
            _span_annotation(
                "faithfulness_sentence",
                FAITHFULNESS_SENTENCE,
                root,
                f"sentence-{s.index}",
                {"label": "unsupported", "score": s.score, "explanation": s.text},
                {
                    **_common_metadata(event),
                    "sentence_index": s.index,
                    "model_revision": event.model.revision,
                },
            )
        )


def exclusion_result(event: ExclusionResultEvent) -> dict[str, Any]:
    survived = (
        f"{event.surviving_gold}/{event.eligible_gold} eligible gold documents survived the "
        f"relevance filters (gold from {event.gold_source})"
    )
    if event.falsely_excluded is None:
        return {
            "label": "no_eligible_gold",
            "explanation": f"no eligible gold document (gold from {event.gold_source}): no evidence either way",
        }
    explanation = survived
    if event.excluded_gold:
        explanation += "; excluded: " + ", ".join(
            f"{g.doc_id} (by {', '.join(g.predicates) or 'no single predicate'})" for g in event.excluded_gold
        )
    if event.leaked:
        explanation += f"; {event.leaked} documents violate an entitlement predicate"
    if event.falsely_excluded:
        return {"label": "falsely_excluded", "score": 1.0, "explanation": explanation}
    return {"label": "not_excluded", "score": 0.0, "explanation": explanation}


def plan_exclusion(event: ExclusionResultEvent, trace: TraceSpans, plan: Plan) -> None:
    if trace.root is None:
        return
    metadata = {
        **_common_metadata(event),
        "gold_source": event.gold_source,
        "eligible_gold": event.eligible_gold,
        "surviving_gold": event.surviving_gold,
        "leaked": event.leaked,
    }
    plan.spans.append(
        _span_annotation(
            "false_exclusion",
            FALSE_EXCLUSION,
            trace.root,
            f"ragmon-{event.gold_source}",
            exclusion_result(event),
            metadata,
        )
    )
    for gold in event.excluded_gold:
        placed = trace.documents.get(gold.doc_id)
        if placed is None:  # not listed by any retriever span: named in the span annotation only
            plan.documents_not_found += 1
            continue
        span_id, position = placed
        plan.documents.append(
            Planned(
                "excluded_document",
                {
                    "name": EXCLUDED_GOLD,
                    "annotator_kind": ANNOTATOR_KIND,
                    "span_id": span_id,
                    "document_position": position,
                    "result": {
                        "label": "excluded",
                        "score": 1.0,
                        "explanation": _clip(
                            f"eligible gold document {gold.doc_id} failed the relevance "
                            f"predicates {', '.join(gold.predicates) or '(none named)'} "
                            f"(gold from {event.gold_source})"
                        ),
                    },
                    "metadata": {
                        **_common_metadata(event),
                        "doc_id": gold.doc_id,
                        "gold_source": event.gold_source,
                    },
                },
            )
        )
