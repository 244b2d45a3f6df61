"""The whole v1 body contract as msgspec structs: the API's fast check of an event body.

pydantic (events.py) stays the contract's definition and the only source of
error messages. The API reads a batch in the plain form straight from its
bytes with these structs (PlainEnvelope, then each body), and checks any
other parsed body with them (check_body); the structs apply the rules to
every field in one pass without building models, except the identifier, name
and stage-name patterns and a predicate's value-fits-operator rule, which
rules_hold checks for all of a body at once after the decode (a msgspec
pattern is one call into Python's re per string, a __post_init__ one call
into Python per struct).
Only a body they refuse is validated by pydantic, which then names the field
and the rule, or accepts what msgspec is stricter about (pydantic's coercions
of "0.5" or "yes", metadata integers past int64). So these structs may be
stricter than the models, never looser: tests/service/contracts/test_fast.py
checks both on valid and broken bodies, tests/service/api/test_plain_batch.py
the plain path against the full one.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from service.contracts import vocabulary as L
from service.contracts.events import (
    LABEL_NEEDS_A_JUDGEMENT,
    feedback_value_problem,
    predicate_value_problem,
    raise_if_problem,
    release_change_problem,
)
from service.contracts.views import (
    AnswerOutcome,
    Candidate,
    ExclusionSample,
    FeedbackValue,
    FiniteFloat,
    MetaKey,
    MetaString,
    ModelName,
    QueryEmbedding,
    SampleRate,
    StageMillis,
    Usage,
    View,
)
from service.contracts.vocabulary import (
    CANONICAL_UUID,
    DEFAULT_VARIANT,
    NAME_PATTERN,
    NOT_ID_CHAR,
    RFC3339,
    STAGE_NAMES_BY_LINE,
    ErrorType,
    EventType,
    FeedbackKind,
    FeedbackReason,
    PredicateOp,
    ReleaseComponent,
    whole_pattern,
)

__all__ = [
    "BODIES",
    "CANONICAL_UUID",
    "RFC3339",
    "FastAnswer",
    "FastDocument",
    "FastFeedbackBody",
    "FastLabelBody",
    "FastProbeMark",
    "FastQuery",
    "FastReleaseBody",
    "FastResponseFormat",
    "FastRetrieval",
    "FastTraceBody",
    "FastTraceError",
    "PlainEnvelope",
    "body_ids",
    "check_body",
    "plain_batch_decoder",
    "predicates_fit",
    "rules_hold",
]

# Identifiers: lengths checked by msgspec, ID_PATTERN by rules_hold over all of a body's identifiers
# at once after the decode. msgspec checks a pattern by one call into Python's re per string, about
# 2.5 µs an identifier here, which was half of a trace's decode (docs/throughput.md).
IdText = Annotated[str, Meta(min_length=1, max_length=L.MAX_ID_LEN)]
Ids = Annotated[list[IdText], Meta(max_length=L.MAX_GOLD_IDS)]
Note = Annotated[str, Meta(max_length=L.MAX_NOTE_CHARS)]


# Stage names and names (variant, intent): lengths here, STAGE_PATTERN and NAME_PATTERN by
# rules_hold (as identifiers).
NameText = Annotated[str, Meta(min_length=1, max_length=L.MAX_NAME_LEN)]
StageText = Annotated[str, Meta(min_length=1, max_length=L.MAX_NAME_LEN)]
FastTimings = Annotated[dict[StageText, StageMillis], Meta(max_length=L.MAX_TIMING_STAGES)]

# Metadata integers within int64: orjson, which reads a body on the full path, reads an integer
# past 64 bits as a float, so a body holding one is not stored as the client wrote it (the full
# path stores what orjson read). Workers' views take any integer (records written before).
FastInt = Annotated[int, Meta(ge=L.MIN_FAST_INT, le=L.MAX_FAST_INT)]
FastScalar = bool | FastInt | FiniteFloat | MetaString
FastValue = FastScalar | Annotated[list[FastScalar], Meta(max_length=L.MAX_METADATA_LIST_LEN)] | None
FastMetadata = Annotated[dict[MetaKey, FastValue], Meta(max_length=L.MAX_METADATA_KEYS)]


class FastPredicate(View, forbid_unknown_fields=True):
    """Predicate's fields and limits. Its rule that the value fits the operator is checked by
    rules_hold for all of a body's predicates after the decode, not by a __post_init__ call into
    Python per predicate (a third of a filter's decode)."""

    field: MetaKey
    op: PredicateOp
    value: FastValue = None


FastPredicates = Annotated[list[FastPredicate], Meta(max_length=L.MAX_PREDICATES)]


class FastFilters(View, forbid_unknown_fields=True):
    entitlement: FastPredicates = []
    relevance: FastPredicates = []


class FastCandidate(Candidate, forbid_unknown_fields=True):
    id: IdText
    metadata: FastMetadata = {}


class FastExclusionSample(ExclusionSample, forbid_unknown_fields=True):
    candidates: Annotated[list[FastCandidate], Meta(max_length=L.MAX_CANDIDATES)]  # type: ignore[assignment]
    gold_ids: Ids | None = None


class FastDocument(View, forbid_unknown_fields=True):
    id: IdText
    text: Annotated[str, Meta(max_length=L.MAX_DOCUMENT_CHARS)]
    score: FiniteFloat | None = None
    metadata: FastMetadata = {}


class FastRetrieval(View, forbid_unknown_fields=True):
    documents: Annotated[list[FastDocument], Meta(max_length=L.MAX_DOCUMENTS)] = []
    filters: FastFilters = msgspec.field(default_factory=FastFilters)
    exclusion_sample: FastExclusionSample | None = None
    index_embedding_model: ModelName | None = None
    index_version: ModelName | None = None


class FastQuery(QueryEmbedding, forbid_unknown_fields=True):
    pass


class FastAnswer(AnswerOutcome, forbid_unknown_fields=True):
    text: Annotated[str, Meta(max_length=L.MAX_ANSWER_CHARS)] = ""
    citations: Annotated[list[IdText], Meta(max_length=L.MAX_CITATIONS)] = []


class FastTraceError(View, forbid_unknown_fields=True):
    type: ErrorType
    stage: StageText = "generation"
    retryable: bool = False
    provider_request_id: IdText | None = None


class FastResponseFormat(View, forbid_unknown_fields=True):
    type: Literal["text", "json"] = "text"
    schema_name: NameText | None = None


class FastProbeMark(View, forbid_unknown_fields=True):
    """events.ProbeMark: `set` checked against NAME_PATTERN, `query_id` against ID_PATTERN by rules_hold."""

    set: NameText
    query_id: IdText


class FastTraceBody(View, forbid_unknown_fields=True):
    trace_id: IdText
    request_id: IdText
    query: FastQuery
    variant: NameText = DEFAULT_VARIANT
    release: IdText | None = None
    sample_rate: SampleRate = L.DEFAULT_SAMPLE_RATE
    session_id: IdText | None = None
    intent: NameText | None = None
    retrieval: FastRetrieval = msgspec.field(default_factory=FastRetrieval)
    answer: FastAnswer = msgspec.field(default_factory=FastAnswer)
    timings: FastTimings = {}
    usage: Usage = msgspec.field(default_factory=Usage)
    error: FastTraceError | None = None
    response_format: FastResponseFormat | None = None
    probe: FastProbeMark | None = None


class FastFeedbackBody(View, forbid_unknown_fields=True):
    trace_id: IdText
    kind: FeedbackKind
    value: FeedbackValue = None
    reason: FeedbackReason | None = None
    document_id: IdText | None = None

    def __post_init__(self) -> None:
        raise_if_problem(feedback_value_problem(self.kind, self.value))


class FastReleaseBody(View, forbid_unknown_fields=True):
    release: IdText
    variant: NameText = DEFAULT_VARIANT
    description: Note | None = None
    component: ReleaseComponent = L.DEFAULT_COMPONENT
    from_: IdText | None = msgspec.field(default=None, name="from")
    to: IdText | None = None

    def __post_init__(self) -> None:
        raise_if_problem(release_change_problem(self.component, self.from_, self.to))


class FastLabelBody(View, forbid_unknown_fields=True):
    trace_id: IdText
    gold_ids: Ids | None = None
    faithful: bool | None = None
    answerable: bool | None = None
    reviewer: IdText | None = None
    note: Note | None = None

    def __post_init__(self) -> None:
        if self.gold_ids is None and self.faithful is None and self.answerable is None:
            raise ValueError(LABEL_NEEDS_A_JUDGEMENT)


BODIES: dict[str, type[View]] = {
    "trace": FastTraceBody,
    "feedback": FastFeedbackBody,
    "release": FastReleaseBody,
    "label": FastLabelBody,
}

# Any character ID_PATTERN does not allow (a line break included) in an identifier breaks it.
_NOT_ID = re.compile(NOT_ID_CHAR)
# STAGE_PATTERN, for names joined by line breaks (a name holding one is caught by the count).
_STAGES = re.compile(STAGE_NAMES_BY_LINE)
_NAME = re.compile(whole_pattern(NAME_PATTERN))


def body_ids(event_type: str, body: Any) -> list[str]:
    """Every identifier of a body read by these structs."""
    if event_type == "trace":
        ids = [
            body.trace_id,
            body.request_id,
            *(d.id for d in body.retrieval.documents),
            *body.answer.citations,
        ]
        error, probe = body.error, body.probe
        for optional in (
            body.release,
            body.session_id,
            None if error is None else error.provider_request_id,
            None if probe is None else probe.query_id,
        ):
            if optional is not None:
                ids.append(optional)
        sample = body.retrieval.exclusion_sample
        if sample is not None:
            ids.extend(c.id for c in sample.candidates)
            ids.extend(sample.gold_ids or ())
        return ids
    if event_type == "feedback":
        return [body.trace_id] if body.document_id is None else [body.trace_id, body.document_id]
    if event_type == "release":
        return [body.release, *(v for v in (body.from_, body.to) if v is not None)]
    return [body.trace_id, *(body.gold_ids or ()), *([body.reviewer] if body.reviewer is not None else ())]


def predicates_fit(predicates: list[FastPredicate]) -> bool:
    """Every predicate's value fits its operator (events.predicate_value_problem, the rule the
    models and the workers' views apply)."""
    return all(predicate_value_problem(p.op, p.value) is None for p in predicates)


def rules_hold(event_type: str, body: Any) -> bool:
    """True when a body read by these structs keeps the rules the structs leave out: every
    identifier matches ID_PATTERN, and in a trace every name NAME_PATTERN, every stage name
    STAGE_PATTERN and every filter predicate's value its operator. The patterns are checked in one
    call per kind instead of one per string."""
    if _NOT_ID.search("".join(body_ids(event_type, body))) is not None:
        return False
    if event_type == "release":
        return _NAME.fullmatch(body.variant) is not None
    if event_type != "trace":
        return True
    if _NAME.fullmatch(body.variant) is None or (
        body.intent is not None and _NAME.fullmatch(body.intent) is None
    ):
        return False
    fmt = body.response_format
    if fmt is not None and fmt.schema_name is not None and _NAME.fullmatch(fmt.schema_name) is None:
        return False
    if body.probe is not None and _NAME.fullmatch(body.probe.set) is None:
        return False
    filters = body.retrieval.filters
    if not (predicates_fit(filters.entitlement) and predicates_fit(filters.relevance)):
        return False
    names = [*body.timings, *(() if body.error is None else (body.error.stage,))]
    if not names:
        return True
    stages = "\n".join(names)
    return _STAGES.fullmatch(stages) is not None and stages.count("\n") == len(names) - 1


def check_body(event_type: str, body: Any) -> bool:
    """True when `body` (parsed JSON) fits the contract of `event_type`; False: ask pydantic why."""
    try:
        read = msgspec.convert(body, BODIES[event_type])
    except (msgspec.ValidationError, KeyError):
        return False
    return rules_hold(event_type, read)


class PlainEnvelope(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """One event of a batch in the plain form; its body kept as the client's bytes, checked apart.

    The id's and the timestamp's forms (CANONICAL_UUID, RFC3339) are the reader's to check, all of
    a batch's ids at once (a pattern here would cost one call into Python's re per string)."""

    type: EventType
    id: str
    timestamp: str
    body: msgspec.Raw


def plain_batch_decoder(max_events: int) -> msgspec.json.Decoder[Any]:
    """A decoder of `{"events": [...]}` holding 1 to `max_events` plain envelopes, nothing else."""
    events = Annotated[list[PlainEnvelope], Meta(min_length=1, max_length=max_events)]
    batch = msgspec.defstruct("PlainBatch", [("events", events)], gc=False, forbid_unknown_fields=True)
    return msgspec.json.Decoder(batch)
