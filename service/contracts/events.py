"""Pydantic models of the v1 wire contract (docs/architecture.md, "The path of an event").

Every model forbids unknown fields, so a typo in a field name is an error that
names the field instead of a silently missing signal. Floats must be finite.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from service.contracts import vocabulary as L
from service.contracts.vocabulary import (
    DEFAULT_VARIANT,
    ID_PATTERN,
    LIST_OPS,
    NAME_PATTERN,
    ORDERING_OPS,
    STAGE_PATTERN,
    ErrorType,
    EventType,
    FeedbackKind,
    FeedbackReason,
    FinishReason,
    PredicateOp,
    ReleaseComponent,
    SchemaVersion,
    TokenKind,
)

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_ID_LEN, pattern=ID_PATTERN)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_NAME_LEN, pattern=NAME_PATTERN)]
StageName = Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_NAME_LEN, pattern=STAGE_PATTERN)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
TokenCount = Annotated[int, Field(ge=0, le=L.MAX_TOKENS)]
MetaKey = Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_METADATA_KEY_LEN)]
MetaScalar = bool | int | FiniteFloat | Annotated[str, StringConstraints(max_length=L.MAX_METADATA_STR_LEN)]
MetaValue = MetaScalar | Annotated[list[MetaScalar], Field(max_length=L.MAX_METADATA_LIST_LEN)] | None


def _check_scalar(key: str, x: Any) -> None:
    t = type(x)
    if t is str:
        if len(x) > L.MAX_METADATA_STR_LEN:
            raise ValueError(f"'{key}': string over {L.MAX_METADATA_STR_LEN} characters")
    elif t is float:
        if not math.isfinite(x):
            raise ValueError(f"'{key}': must be a finite number")
    elif t is not int and t is not bool:
        raise ValueError(f"'{key}': must be a string, number, boolean, null or a list of those")


def _check_metadata(value: Any) -> dict[str, Any]:
    """Metadata checked in one pass.

    A union of constrained scalar types costs pydantic a trial per member and
    per value; on an exclusion sample (50 candidates x a few keys) that was
    most of a trace's validation time. The rules are the same, and an error
    names the key and the rule once instead of listing every union member.
    """
    if not isinstance(value, dict):
        raise ValueError("metadata must be an object")
    if len(value) > L.MAX_METADATA_KEYS:
        raise ValueError(f"at most {L.MAX_METADATA_KEYS} keys, got {len(value)}")
    max_str, max_key = L.MAX_METADATA_STR_LEN, L.MAX_METADATA_KEY_LEN
    for key, x in value.items():
        if type(key) is not str or not 0 < len(key) <= max_key:
            raise ValueError(f"key {key!r}: 1 to {max_key} characters")
        t = type(x)
        if t is str:  # the common case, checked inline: this loop runs for every candidate's every key
            if len(x) > max_str:
                raise ValueError(f"'{key}': string over {max_str} characters")
        elif t is list:
            if len(x) > L.MAX_METADATA_LIST_LEN:
                raise ValueError(f"'{key}': list over {L.MAX_METADATA_LIST_LEN} items")
            for item in x:
                _check_scalar(key, item)
        elif x is not None:
            _check_scalar(key, x)
    return value


_METADATA_SCHEMA = {
    "type": "object",
    "maxProperties": L.MAX_METADATA_KEYS,
    "propertyNames": {"minLength": 1, "maxLength": L.MAX_METADATA_KEY_LEN},
    "additionalProperties": {
        "anyOf": [
            {"type": "string", "maxLength": L.MAX_METADATA_STR_LEN},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "null"},
            {
                "type": "array",
                "maxItems": L.MAX_METADATA_LIST_LEN,
                "items": {
                    "anyOf": [
                        {"type": "string", "maxLength": L.MAX_METADATA_STR_LEN},
                        {"type": "number"},
                        {"type": "boolean"},
                    ]
                },
            },
        ]
    },
}
Metadata = Annotated[dict[str, Any], PlainValidator(_check_metadata), WithJsonSchema(_METADATA_SCHEMA)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, str_strip_whitespace=False)


class Document(Strict):
    id: Identifier
    text: Annotated[str, StringConstraints(max_length=L.MAX_DOCUMENT_CHARS)]
    score: FiniteFloat | None = None
    metadata: Metadata = Field(default_factory=dict)


class Candidate(Strict):
    """A document retrieved for the query under the entitlement filters alone."""

    id: Identifier
    score: FiniteFloat | None = None
    metadata: Metadata = Field(default_factory=dict)


class Predicate(Strict):
    """One filter predicate: `metadata[field] <op> value`.

    Ordering operators take numbers, or RFC 3339 dates/timestamps compared as
    instants; `in`/`not_in` take a list; `exists` takes true/false (default true).
    """

    field: MetaKey
    op: PredicateOp
    value: MetaValue = None

    @model_validator(mode="after")
    def _value_fits_op(self) -> Predicate:
        raise_if_problem(predicate_value_problem(self.op, self.value))
        return self


def raise_if_problem(problem: str | None) -> None:
    """Raise ValueError(problem) when a rule below found one (the models' and the views' validators)."""
    if problem is not None:
        raise ValueError(problem)


def predicate_value_problem(op: str, v: Any) -> str | None:
    """Why `value` does not fit `op`, or None (shared with the workers' decode views)."""
    if op in LIST_OPS:
        if not isinstance(v, list):
            return f"op '{op}' needs a list value"
    elif op in ORDERING_OPS:
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            return f"op '{op}' needs a number or an RFC 3339 date value"
        if isinstance(v, str) and not _is_instant(v):
            return f"op '{op}' value {v!r} is neither a number nor an RFC 3339 date"
    elif op == "exists":
        if v is not None and not isinstance(v, bool):
            return "op 'exists' takes true, false or no value"
    elif isinstance(v, list):
        return f"op '{op}' compares one value, not a list (use 'in')"
    elif v is None:
        return f"op '{op}' needs a value; to test for a missing field use 'exists'"
    return None


def parse_instant(value: str) -> datetime | None:
    """Parse an RFC 3339 date or timestamp; a bare date is midnight UTC."""
    text = value.strip()
    if len(text) < 10:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


@lru_cache(maxsize=1024)
def _is_instant(value: str) -> bool:
    """parse_instant(value) is not None, remembered: a filter's date bounds repeat from request to
    request (at most 1,024 values of at most MAX_METADATA_STR_LEN characters are kept)."""
    return parse_instant(value) is not None


class Filters(Strict):
    entitlement: Annotated[list[Predicate], Field(max_length=L.MAX_PREDICATES)] = Field(default_factory=list)
    relevance: Annotated[list[Predicate], Field(max_length=L.MAX_PREDICATES)] = Field(default_factory=list)


class ExclusionSample(Strict):
    candidates: Annotated[list[Candidate], Field(max_length=L.MAX_CANDIDATES)]
    gold_ids: Annotated[list[Identifier], Field(max_length=L.MAX_GOLD_IDS)] | None = None


class Retrieval(Strict):
    documents: Annotated[list[Document], Field(max_length=L.MAX_DOCUMENTS)] = Field(default_factory=list)
    filters: Filters = Field(default_factory=Filters)
    exclusion_sample: ExclusionSample | None = None
    # The embedding model the searched index was built with: a query embedded by another model retrieves
    # garbage silently (docs/errors.md, "Encoder mismatch"). Compared with query.embedding_model.
    index_embedding_model: Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_ID_LEN)] | None = (
        None
    )
    # The version of the searched index (a rebuild, a re-chunking): probe results are compared per
    # (embedding model, index version) (docs/probes.md).
    index_version: Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_ID_LEN)] | None = None


EMBEDDING_NEEDS_MODEL = (
    "embedding_model is required with embedding: vectors of different models are never compared"
)


class Query(Strict):
    text: Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_QUERY_CHARS)]
    embedding: Annotated[list[FiniteFloat], Field(min_length=1, max_length=L.MAX_EMBEDDING_DIM)] | None = None
    embedding_model: Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_ID_LEN)] | None = None

    @model_validator(mode="after")
    def _embedding_names_its_model(self) -> Query:
        if self.embedding is not None and self.embedding_model is None:
            raise ValueError(EMBEDDING_NEEDS_MODEL)
        return self


class Answer(Strict):
    text: Annotated[str, StringConstraints(max_length=L.MAX_ANSWER_CHARS)] = ""
    refused: bool = False
    citations: Annotated[list[Identifier], Field(max_length=L.MAX_CITATIONS)] = Field(default_factory=list)
    # Why the generation stopped: `length` is a truncated answer (the token limit cut it).
    finish_reason: FinishReason | None = None


class ResponseFormat(Strict):
    """What the app asked the model to answer in: `json` answers are checked for JSON validity, and against
    the named schema (configured under `checks.schemas`) when one is given (docs/checks.md)."""

    type: Literal["text", "json"] = "text"
    schema_name: Name | None = None


class TraceError(Strict):
    """The request failed (a provider outage, a rate limit, a timeout): counted as an error, kept out of
    every quality signal (docs/errors.md)."""

    type: ErrorType
    stage: StageName = "generation"  # where it failed: a stage name, as in timings
    retryable: bool = False
    provider_request_id: Identifier | None = None  # the provider's id of the failed call, for its support


# Constraints, not a Python validator: this runs on every trace in every worker.
StageMillis = Annotated[float, Field(ge=0, le=L.MAX_TIMING_MS, allow_inf_nan=False)]
Timings = Annotated[dict[StageName, StageMillis], Field(max_length=L.MAX_TIMING_STAGES)]


class Usage(Strict):
    model: Annotated[str, StringConstraints(min_length=1, max_length=L.MAX_ID_LEN)] | None = None
    tokens: dict[TokenKind, TokenCount] = Field(default_factory=dict)
    cost_usd: Annotated[float, Field(ge=0, le=L.MAX_COST_USD, allow_inf_nan=False)] | None = None


class ProbeMark(Strict):
    """The trace is a replay of a registered probe query (`ragmon probes add`), not a user's request: it is
    produced to the probes topic and never counted in a production series (docs/probes.md)."""

    set: Name  # the probe set, as registered
    query_id: Identifier  # the probe query's id within the set


class TraceBody(Strict):
    trace_id: Identifier
    request_id: Identifier
    variant: Name = DEFAULT_VARIANT
    release: Identifier | None = None
    sample_rate: Annotated[
        float, Field(gt=L.MIN_SAMPLE_RATE_EXCLUSIVE, le=L.MAX_SAMPLE_RATE, allow_inf_nan=False)
    ] = L.DEFAULT_SAMPLE_RATE
    session_id: Identifier | None = None
    intent: Name | None = None
    query: Query
    retrieval: Retrieval = Field(default_factory=Retrieval)
    answer: Answer = Field(default_factory=Answer)
    timings: Timings = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    error: TraceError | None = None
    response_format: ResponseFormat | None = None
    probe: ProbeMark | None = None


class FeedbackBody(Strict):
    trace_id: Identifier
    kind: FeedbackKind
    value: (
        bool
        | Annotated[float, Field(ge=-L.MAX_FEEDBACK_VALUE, le=L.MAX_FEEDBACK_VALUE, allow_inf_nan=False)]
        | None
    ) = None
    reason: FeedbackReason | None = None
    document_id: Identifier | None = None

    @model_validator(mode="after")
    def _value_fits_kind(self) -> FeedbackBody:
        raise_if_problem(feedback_value_problem(self.kind, self.value))
        return self

    @property
    def thumbs_up(self) -> bool | None:
        return thumbs_up(self.kind, self.value)


def thumbs_up(kind: str, value: Any) -> bool | None:
    """True for a thumbs value true or 1, False for false or -1, None for other kinds (shared with the views)."""
    if kind != "thumbs":
        return None
    return value is True or (not isinstance(value, bool) and value == 1)


def feedback_value_problem(kind: str, v: Any) -> str | None:
    """Why `value` does not fit the feedback `kind`, or None (shared with service/contracts/fast.py)."""
    if kind == "thumbs" and not (isinstance(v, bool) or v in (1, -1, 1.0, -1.0)):
        return "thumbs feedback needs value true/false or 1/-1"
    if kind == "dwell" and (isinstance(v, bool) or not isinstance(v, int | float) or v < 0):
        return "dwell feedback needs a non-negative number of seconds as value"
    return None


def release_change_problem(component: str, from_: str | None, to: str | None) -> str | None:
    """Why a release marker's component and versions do not fit together, or None (shared with
    fast.py and the workers' views). An app release needs neither version (its `release` names it);
    a component's marker names the version now serving in `to`; `from` and `to` must differ."""
    if component != L.DEFAULT_COMPONENT and to is None:
        return f"'to': required when component is '{component}' (the version now serving)"
    if from_ is not None and from_ == to:
        return f"'from' and 'to' are both {to!r}: a change needs two different versions"
    return None


class ReleaseBody(Strict):
    """A release marker: the app (`component` app, the default) or one component of it changed,
    from the version `from` (optional) to `to` (required for a component other than app)."""

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True)  # dumps `from`, as the wire has it

    release: Identifier
    variant: Name = DEFAULT_VARIANT
    description: Annotated[str, StringConstraints(max_length=L.MAX_NOTE_CHARS)] | None = None
    component: ReleaseComponent = L.DEFAULT_COMPONENT
    from_: Identifier | None = Field(None, alias="from")
    to: Identifier | None = None

    @model_validator(mode="after")
    def _change_fits(self) -> ReleaseBody:
        raise_if_problem(release_change_problem(self.component, self.from_, self.to))
        return self


LABEL_NEEDS_A_JUDGEMENT = "a label needs at least one of gold_ids, faithful, answerable"


class LabelBody(Strict):
    trace_id: Identifier
    gold_ids: Annotated[list[Identifier], Field(max_length=L.MAX_GOLD_IDS)] | None = None
    faithful: bool | None = None
    answerable: bool | None = None
    reviewer: Identifier | None = None
    note: Annotated[str, StringConstraints(max_length=L.MAX_NOTE_CHARS)] | None = None

    @model_validator(mode="after")
    def _says_something(self) -> LabelBody:
        if self.gold_ids is None and self.faithful is None and self.answerable is None:
            raise ValueError(LABEL_NEEDS_A_JUDGEMENT)
        return self


BODY_MODELS: dict[str, type[Strict]] = {
    "trace": TraceBody,
    "feedback": FeedbackBody,
    "release": ReleaseBody,
    "label": LabelBody,
}


class EventEnvelope(Strict):
    """One event as the client sends it; `body` is validated by its type's model."""

    type: EventType
    id: UUID
    timestamp: datetime
    body: dict[str, Any]

    @field_validator("timestamp")
    @classmethod
    def _timezone_required(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("timestamp needs a timezone offset (RFC 3339), e.g. 2026-01-01T12:00:00Z")
        return v


class IngestEvent(Strict):
    """Documentation model of one event in POST /v1/events (the API validates per event)."""

    type: EventType
    id: UUID
    timestamp: datetime
    body: TraceBody | FeedbackBody | ReleaseBody | LabelBody


class IngestBatch(Strict):
    events: Annotated[list[IngestEvent], Field(min_length=1, max_length=L.MAX_EVENTS_PER_BATCH)]


class StoredEvent(Strict):
    """The Kafka record value: a validated, redacted event plus what the API added.

    `tenant` comes from the API key, `received_at` from the API's clock.
    """

    schema_version: SchemaVersion = L.SCHEMA_VERSION
    id: UUID
    type: EventType
    tenant: Name
    timestamp: datetime
    received_at: datetime
    body: dict[str, Any]

    def parsed_body(self) -> Strict:
        return BODY_MODELS[self.type].model_validate(self.body)


def is_finite_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
