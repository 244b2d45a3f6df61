"""Building blocks of per-worker decode views of the v1 contract (msgspec structs).

The API validates every event against the pydantic models in events.py before
it is stored. A worker then decodes each record once, into a view that holds
only the fields it reads, with the same rules on those fields (limits,
patterns, finite numbers, the predicate and embedding rules, shared with
events.py). msgspec decodes and validates in one pass and skips the fields a
view does not name without building them, which is where a worker's decode
time went (docs/throughput.md). A record whose read fields break a rule is a
dead letter, exactly as with the full models; tests/service/contracts checks
that views and models agree on valid and invalid records.

Views name only the fields they read, so they cannot forbid unknown fields,
except where they declare all of an object's fields (Candidate, Predicate).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar
from uuid import UUID

import msgspec
from msgspec import Meta

from service.contracts import vocabulary as L
from service.contracts.events import (
    EMBEDDING_NEEDS_MODEL,
    feedback_value_problem,
    predicate_value_problem,
    raise_if_problem,
    release_change_problem,
    thumbs_up,
)
from service.contracts.vocabulary import (
    ID_PATTERN,
    NAME_PATTERN,
    STAGE_PATTERN,
    SchemaVersion,
    whole_pattern,
)

# The closed sets as the workers' views import them (from here, with the building blocks).
from service.contracts.vocabulary import ErrorType as ErrorType
from service.contracts.vocabulary import EventType as EventType
from service.contracts.vocabulary import FeedbackKind as FeedbackKind
from service.contracts.vocabulary import FeedbackReason as FeedbackReason
from service.contracts.vocabulary import FinishReason as FinishReason
from service.contracts.vocabulary import PredicateOp as PredicateOp
from service.contracts.vocabulary import ReleaseComponent as ReleaseComponent
from service.contracts.vocabulary import TokenKind as TokenKind

Identifier = Annotated[str, Meta(min_length=1, max_length=L.MAX_ID_LEN, pattern=whole_pattern(ID_PATTERN))]
Name = Annotated[str, Meta(min_length=1, max_length=L.MAX_NAME_LEN, pattern=whole_pattern(NAME_PATTERN))]
StageName = Annotated[
    str, Meta(min_length=1, max_length=L.MAX_NAME_LEN, pattern=whole_pattern(STAGE_PATTERN))
]
FiniteFloat = Annotated[float, Meta(ge=-L.MAX_FINITE_FLOAT, le=L.MAX_FINITE_FLOAT)]
AwareDatetime = Annotated[datetime, Meta(tz=True)]
ModelName = Annotated[str, Meta(min_length=1, max_length=L.MAX_ID_LEN)]

MetaKey = Annotated[str, Meta(min_length=1, max_length=L.MAX_METADATA_KEY_LEN)]
MetaString = Annotated[str, Meta(max_length=L.MAX_METADATA_STR_LEN)]
MetaScalar = bool | int | FiniteFloat | MetaString
MetaValue = MetaScalar | Annotated[list[MetaScalar], Meta(max_length=L.MAX_METADATA_LIST_LEN)] | None
Metadata = Annotated[dict[MetaKey, MetaValue], Meta(max_length=L.MAX_METADATA_KEYS)]

FeedbackValue = bool | Annotated[float, Meta(ge=-L.MAX_FEEDBACK_VALUE, le=L.MAX_FEEDBACK_VALUE)] | None


class View(msgspec.Struct, gc=False):
    """What a record said, for a worker's processor.

    gc=False: a view holds decoded JSON only, which cannot form a reference
    cycle, so the garbage collector need not track (and walk) every one of them.
    """


class Predicate(View, forbid_unknown_fields=True):
    field: MetaKey
    op: PredicateOp
    value: MetaValue = None

    def __post_init__(self) -> None:
        raise_if_problem(predicate_value_problem(self.op, self.value))


Predicates = Annotated[list[Predicate], Meta(max_length=L.MAX_PREDICATES)]


class Filters(View, forbid_unknown_fields=True):
    entitlement: Predicates = []
    relevance: Predicates = []


class Candidate(View, forbid_unknown_fields=True):
    id: Identifier
    score: FiniteFloat | None = None
    metadata: Metadata = {}


class DocumentMetadata(View):
    """A context document as a worker that reads only its metadata sees it."""

    metadata: Metadata = {}


class ExclusionSample(View, forbid_unknown_fields=True):
    candidates: Annotated[list[Candidate], Meta(max_length=L.MAX_CANDIDATES)]
    gold_ids: Annotated[list[Identifier], Meta(max_length=L.MAX_GOLD_IDS)] | None = None


class QueryEmbedding(View):
    text: Annotated[str, Meta(min_length=1, max_length=L.MAX_QUERY_CHARS)]
    embedding: Annotated[list[FiniteFloat], Meta(min_length=1, max_length=L.MAX_EMBEDDING_DIM)] | None = None
    embedding_model: ModelName | None = None

    def __post_init__(self) -> None:
        if self.embedding is not None and self.embedding_model is None:
            raise ValueError(EMBEDDING_NEEDS_MODEL)


class AnswerOutcome(View):
    refused: bool = False
    citations: Annotated[list[Identifier], Meta(max_length=L.MAX_CITATIONS)] = []
    finish_reason: FinishReason | None = None


class AnswerText(AnswerOutcome):
    """The answer with its text: what the answer checks and the faithfulness scorer read."""

    text: Annotated[str, Meta(max_length=L.MAX_ANSWER_CHARS)] = ""


class DocumentText(View):
    """A document given to the generator: its id and text (the premise, the checks' context)."""

    id: Identifier
    text: Annotated[str, Meta(max_length=L.MAX_DOCUMENT_CHARS)]


class TextRetrieval(View):
    documents: Annotated[list[DocumentText], Meta(max_length=L.MAX_DOCUMENTS)] = []


class ResponseFormat(View, forbid_unknown_fields=True):
    """events.ResponseFormat."""

    type: Literal["text", "json"] = "text"
    schema_name: Name | None = None


class TraceError(View, forbid_unknown_fields=True):
    """events.TraceError: the request failed; every worker that scores quality skips the trace."""

    type: ErrorType
    stage: StageName = "generation"
    retryable: bool = False
    provider_request_id: Identifier | None = None


class FeedbackView(View):
    """A feedback's trace, kind and value, the value checked for its kind as FeedbackBody checks it."""

    trace_id: Identifier
    kind: FeedbackKind
    value: FeedbackValue = None

    def __post_init__(self) -> None:
        raise_if_problem(feedback_value_problem(self.kind, self.value))

    @property
    def thumbs_up(self) -> bool | None:
        """As FeedbackBody.thumbs_up: True for true or 1, False for false or -1, None for other kinds."""
        return thumbs_up(self.kind, self.value)


class ReleaseMarker(View):
    """events.ReleaseBody as the workers read it: what changed (the app or one component), from and to
    which version; the same rules (events.release_change_problem)."""

    release: Identifier
    variant: Name = L.DEFAULT_VARIANT
    component: ReleaseComponent = L.DEFAULT_COMPONENT
    from_: Identifier | None = msgspec.field(default=None, name="from")
    to: Identifier | None = None

    def __post_init__(self) -> None:
        raise_if_problem(release_change_problem(self.component, self.from_, self.to))


class ProbeMark(View, forbid_unknown_fields=True):
    """events.ProbeMark: which registered probe query a probe trace replays."""

    set: Name
    query_id: Identifier


StageMillis = Annotated[float, Meta(ge=0, le=L.MAX_TIMING_MS)]
Timings = Annotated[dict[StageName, StageMillis], Meta(max_length=L.MAX_TIMING_STAGES)]


class Usage(View, forbid_unknown_fields=True):
    model: ModelName | None = None
    tokens: dict[TokenKind, Annotated[int, Meta(ge=0, le=L.MAX_TOKENS)]] = {}
    cost_usd: Annotated[float, Meta(ge=0, le=L.MAX_COST_USD)] | None = None


SampleRate = Annotated[float, Meta(gt=L.MIN_SAMPLE_RATE_EXCLUSIVE, le=L.MAX_SAMPLE_RATE)]

B = TypeVar("B")


class Record(msgspec.Struct, Generic[B], gc=False, forbid_unknown_fields=True):
    """The stored envelope (StoredEvent) around a worker's view of the body."""

    id: UUID
    type: EventType
    tenant: Name
    timestamp: AwareDatetime
    received_at: AwareDatetime
    body: B
    schema_version: SchemaVersion = L.SCHEMA_VERSION


def record_decoder(view: type[Any]) -> msgspec.json.Decoder[Any]:
    """A JSON decoder of one stored record whose body is read as `view`."""
    return msgspec.json.Decoder(Record[view])  # type: ignore[valid-type]
