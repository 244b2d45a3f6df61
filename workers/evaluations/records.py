"""ragmon's evaluations -> OpenTelemetry `gen_ai.evaluation.result` log records (pure; docs/otlp.md).

| source | gen_ai.evaluation.name | score.label | score.value |
|---|---|---|---|
| faithfulness score (answer mode) | `ragmon.faithfulness` | faithful / unfaithful / no_claims | HHEM P(consistent) |
| faithfulness score (sentence mode) | `ragmon.faithfulness` | faithful / unfaithful / no_claims | supported-sentence fraction |
| each unsupported sentence | `ragmon.faithfulness.sentence` | unsupported | the sentence's P(consistent) |
| exclusion result | `ragmon.false_exclusion` | falsely_excluded / not_excluded / no_eligible_gold | 1 / 0 / absent |
| label `faithful` | `ragmon.label.faithful` | faithful / unfaithful | 1 / 0 |
| label `answerable` | `ragmon.label.answerable` | answerable / unanswerable | 1 / 0 |
| each deterministic check that ran on a trace | `ragmon.check.<check>` | pass / fail | 1 / 0 |

Every record names the evaluated trace: its OTLP trace id when the ragmon trace id is one (32 hex
digits, not all zero: traces assembled from OTLP spans, or a native trace that sends its own
OpenTelemetry trace id, docs/otlp.md "Native traces and span ids"); the span id is left empty here (no
score event carries a span id): the exporter fills in the trace's root span id where it has seen the
trace's spans on the spans topic (workers/evaluations/roots.py), so the record is attached to the root
span; otherwise to the trace only.
`ragmon.evaluation.id` is stable across redeliveries and replays: a backend can deduplicate on it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import SEVERITY_NUMBER_INFO, LogRecord

from service.contracts import LabelBody
from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
from workers.checks.answer import CHECKS, Result

EVENT_NAME = "gen_ai.evaluation.result"
# The event's attributes (OpenTelemetry GenAI semantic conventions, the gen_ai.evaluation.result event).
NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"

FAITHFULNESS = "ragmon.faithfulness"
FAITHFULNESS_SENTENCE = "ragmon.faithfulness.sentence"
FALSE_EXCLUSION = "ragmon.false_exclusion"
LABEL_FAITHFUL = "ragmon.label.faithful"
LABEL_ANSWERABLE = "ragmon.label.answerable"
CHECK_PREFIX = "ragmon.check."  # + the check's name (workers/checks/answer.py CHECKS)
HHEM = "hhem-2.1-open"
MAX_EXPLANATION = 4000  # characters

# Metric label values (closed set): ragmon_evaluations_built_total{kind}.
KINDS = (
    "faithfulness",
    "faithfulness_sentence",
    "false_exclusion",
    "label_faithful",
    "label_answerable",
    "check",
)
EVALUATION_NAMESPACE = uuid.UUID("0e8f3a6c-5d0b-4a8e-9a57-2f6c1b7d9e43")  # never changes
_TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")


def otlp_trace_id(trace_id: str) -> bytes:
    """The 16 bytes of the OTLP trace id a ragmon trace id names, or b"" (no trace id) when it names none."""
    if not _TRACE_ID.match(trace_id) or int(trace_id, 16) == 0:
        return b""
    return bytes.fromhex(trace_id)


@dataclass(frozen=True)
class Evaluation:
    kind: str  # one of KINDS
    tenant: str
    trace_id: str  # the ragmon trace id
    at: float  # when it was evaluated (epoch seconds): the record's time
    record: LogRecord


def _value(v: Any) -> AnyValue:
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    return AnyValue(string_value=str(v))


def _clip(text: str) -> str:
    return text if len(text) <= MAX_EXPLANATION else text[: MAX_EXPLANATION - 1] + "…"


def _record(
    kind: str,
    tenant: str,
    trace_id: str,
    when: datetime,
    observed: float,
    evaluation_id: uuid.UUID,
    attributes: dict[str, Any],
) -> Evaluation:
    attrs = {**attributes, "ragmon.tenant": tenant, "ragmon.trace_id": trace_id}
    attrs["ragmon.evaluation.id"] = str(evaluation_id)
    if EXPLANATION in attrs:
        attrs[EXPLANATION] = _clip(attrs[EXPLANATION])
    at = when.timestamp()
    record = LogRecord(
        time_unix_nano=int(at * 1e9),
        observed_time_unix_nano=int(observed * 1e9),
        severity_number=SEVERITY_NUMBER_INFO,
        severity_text="INFO",
        event_name=EVENT_NAME,
        trace_id=otlp_trace_id(trace_id),
        attributes=[KeyValue(key=k, value=_value(v)) for k, v in attrs.items() if v is not None],
    )
    return Evaluation(kind, tenant, trace_id, at, record)


def _eval_id(event_id: uuid.UUID, name: str, index: int = 0) -> uuid.UUID:
    return uuid.uuid5(EVALUATION_NAMESPACE, f"{event_id}/{name}/{index}")


def _trace_context(event: FaithfulnessScoreEvent | ExclusionResultEvent) -> dict[str, Any]:
    return {
        "ragmon.score_event.id": str(event.event_id),
        "ragmon.source_event.id": str(event.source_event_id),
        "ragmon.request_id": event.request_id,
        "ragmon.variant": event.variant,
        "ragmon.release": event.release,
        "ragmon.intent": event.intent,
        "ragmon.annotator.kind": "CODE",
    }


def faithfulness_records(
    event: FaithfulnessScoreEvent, observed: float, include_text: bool = True
) -> Iterator[Evaluation]:
    common = {
        **_trace_context(event),
        "ragmon.evaluator": HHEM,
        "ragmon.evaluator.version": event.model.revision,
        "ragmon.faithfulness.mode": event.mode,
        "ragmon.faithfulness.threshold": event.threshold,
        # the chance this trace was evaluated at all (app sampling x scorer sampling): weight 1/p
        "ragmon.inclusion_probability": event.app_sample_rate * event.scorer_sample_rate,
        "ragmon.app_sample_rate": event.app_sample_rate,
        "ragmon.scorer_sample_rate": event.scorer_sample_rate,
    }
    answer: dict[str, Any] = {NAME: FAITHFULNESS}
    if event.outcome == "no_claims":
        why = "the answer is a refusal" if event.no_claims_reason == "refused" else "the answer is empty"
        answer |= {SCORE_LABEL: "no_claims", EXPLANATION: f"not scored: {why}, so it makes no claim to check"}
    else:
        answer[SCORE_LABEL] = "unfaithful" if event.below_threshold else "faithful"
        answer[SCORE_VALUE] = float(event.score) if event.score is not None else None
        if event.mode == "answer":
            answer[EXPLANATION] = (
                f"HHEM-2.1-Open P(consistent) = {event.score:.3f}; threshold {event.threshold:.3f}"
            )
        else:
            answer[EXPLANATION] = (
                f"{event.sentences_supported}/{event.sentences_total} sentences supported "
                f"(each sentence's P(consistent) >= {event.threshold:.3f})"
            )
            answer["ragmon.faithfulness.sentences_total"] = event.sentences_total
            answer["ragmon.faithfulness.sentences_supported"] = event.sentences_supported
    if event.truncation is not None:
        answer["ragmon.faithfulness.truncated_tokens"] = event.truncation.truncated_tokens
    yield _record(
        "faithfulness",
        event.tenant,
        event.trace_id,
        event.scored_at,
        observed,
        _eval_id(event.event_id, FAITHFULNESS),
        {**common, **answer},
    )
    for s in event.unsupported_sentences:
        yield _record(
            "faithfulness_sentence",
            event.tenant,
            event.trace_id,
            event.scored_at,
            observed,
            _eval_id(event.event_id, FAITHFULNESS_SENTENCE, s.index),
            {
                **common,
                NAME: FAITHFULNESS_SENTENCE,
                SCORE_LABEL: "unsupported",
                SCORE_VALUE: float(s.score),
                EXPLANATION: s.text if include_text else f"sentence {s.index} is not supported",
                "ragmon.faithfulness.sentence_index": s.index,
            },
        )


def exclusion_records(event: ExclusionResultEvent, observed: float) -> Iterator[Evaluation]:
    attrs: dict[str, Any] = {
        **_trace_context(event),
        NAME: FALSE_EXCLUSION,
        "ragmon.evaluator": "ragmon.exclusion",
        "ragmon.evaluator.version": f"score-schema-{event.schema_version}",
        "ragmon.exclusion.gold_source": event.gold_source,
        "ragmon.exclusion.eligible_gold": event.eligible_gold,
        "ragmon.exclusion.surviving_gold": event.surviving_gold,
        "ragmon.exclusion.leaked": event.leaked,
    }
    if event.falsely_excluded is None:
        attrs[SCORE_LABEL] = "no_eligible_gold"
        attrs[EXPLANATION] = (
            f"no eligible gold document (gold from {event.gold_source}): no evidence either way"
        )
    else:
        explanation = (
            f"{event.surviving_gold}/{event.eligible_gold} eligible gold documents survived the "
            f"relevance filters (gold from {event.gold_source})"
        )
        if event.excluded_gold:
            explanation += "; excluded: " + ", ".join(
                f"{g.doc_id} (by {', '.join(g.predicates) or 'no single predicate'})"
                for g in event.excluded_gold
            )
        attrs[SCORE_LABEL] = "falsely_excluded" if event.falsely_excluded else "not_excluded"
        attrs[SCORE_VALUE] = 1.0 if event.falsely_excluded else 0.0
        attrs[EXPLANATION] = explanation
    yield _record(
        "false_exclusion",
        event.tenant,
        event.trace_id,
        event.scored_at,
        observed,
        _eval_id(event.event_id, FALSE_EXCLUSION),
        attrs,
    )


def label_records(
    event_id: uuid.UUID, tenant: str, received_at: datetime, label: LabelBody, observed: float
) -> Iterator[Evaluation]:
    """A human (or offline) label's judgements; its gold ids are no evaluation of the trace and are not sent."""
    common = {
        "ragmon.label.event_id": str(event_id),
        "ragmon.annotator.kind": "HUMAN",
        "ragmon.evaluator": "human",
    }
    for kind, name, verdict, yes, no in (
        ("label_faithful", LABEL_FAITHFUL, label.faithful, "faithful", "unfaithful"),
        ("label_answerable", LABEL_ANSWERABLE, label.answerable, "answerable", "unanswerable"),
    ):
        if verdict is None:
            continue
        yield _record(
            kind,
            tenant,
            label.trace_id,
            received_at,
            observed,
            _eval_id(event_id, name),
            {**common, NAME: name, SCORE_LABEL: yes if verdict else no, SCORE_VALUE: 1.0 if verdict else 0.0},
        )


def check_records(
    event_id: uuid.UUID,
    tenant: str,
    trace_id: str,
    received_at: datetime,
    context: dict[str, Any],
    result: Result,
    observed: float,
) -> Iterator[Evaluation]:
    """One record per check that ran on the trace (a skipped check, e.g. json_valid on a text answer, is no
    evaluation); a failure's reason is its explanation. `context`: the trace's variant, release, intent."""
    common = {
        **context,
        "ragmon.source_event.id": str(event_id),
        "ragmon.annotator.kind": "CODE",
        "ragmon.evaluator": "ragmon.checks",
    }
    for check in CHECKS:
        outcome = result.outcomes[check]
        if outcome == "skip":
            continue
        passed = outcome == "pass"
        attrs: dict[str, Any] = {
            **common,
            NAME: CHECK_PREFIX + check,
            SCORE_LABEL: outcome,
            SCORE_VALUE: 1.0 if passed else 0.0,
        }
        if not passed:
            attrs[EXPLANATION] = result.details.get(check, "")
        yield _record(
            "check", tenant, trace_id, received_at, observed, _eval_id(event_id, CHECK_PREFIX + check), attrs
        )
