"""The v1 wire contract's vocabulary: every closed set, pattern and numeric limit, written once.

events.py (the pydantic models), views.py (the workers' msgspec views) and fast.py (the API's fast
structs) import them from here, and tests/service/contracts/test_contract_agreement.py holds the
three to each other.

The limits bound what one event can cost downstream (memory in a worker, tokens in
the faithfulness scorer, cardinality in Redis) and are part of the contract:
an app team can rely on them and the JSON Schema carries them.
"""

from __future__ import annotations

from typing import Literal, get_args

# -- closed sets ---------------------------------------------------------------------------------
# Each is a Literal (for the models' and structs' annotations) and a tuple of its values, in the
# Literal's order (error messages list them in it), derived from it.

EventType = Literal["trace", "feedback", "release", "label"]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
ListOp = Literal["in", "not_in"]  # take a list value
LIST_OPS: tuple[str, ...] = get_args(ListOp)
OrderingOp = Literal["gt", "gte", "lt", "lte"]  # take a number or an RFC 3339 date
ORDERING_OPS: tuple[str, ...] = get_args(OrderingOp)
PredicateOp = Literal["eq", "neq", ListOp, OrderingOp, "exists"]  # nested Literals flatten, in order
PREDICATE_OPS: tuple[str, ...] = get_args(PredicateOp)
FeedbackKind = Literal["thumbs", "regenerate", "citation_click", "copy", "dwell", "followup", "edit"]
FEEDBACK_KINDS: tuple[str, ...] = get_args(FeedbackKind)
FeedbackReason = Literal["wrong", "incomplete", "off_topic", "harmful", "slow", "other"]
FEEDBACK_REASONS: tuple[str, ...] = get_args(FeedbackReason)
TokenKind = Literal["prompt", "completion", "cached_prompt", "reasoning", "embedding", "rerank"]
TOKEN_KINDS: tuple[str, ...] = get_args(TokenKind)
# A trace's error (the request failed: not a quality problem, docs/errors.md) and the generation's
# finish reason. Both become Prometheus label values.
ErrorType = Literal["timeout", "rate_limit", "provider_error", "content_filter", "context_length", "other"]
ERROR_TYPES: tuple[str, ...] = get_args(ErrorType)
FinishReason = Literal["stop", "length", "content_filter", "tool_calls", "other"]
FINISH_REASONS: tuple[str, ...] = get_args(FinishReason)
# The deterministic answer checks (docs/checks.md), in the order they are reported: a label value of
# ragmon_rag_check_results_total and a key of the rules' per-check limits.
CheckName = Literal[
    "citations_known", "answer_length", "figures_grounded", "json_valid", "json_schema", "forbidden_patterns"
]
CHECK_NAMES: tuple[str, ...] = get_args(CheckName)
# Implicit user signals of a reviewed trace (the review store's review_signal.signal; docs/review.md): the
# negative ones are read as "the answer was wrong", the positive ones as "it was right".
ImplicitSignal = Literal[
    "thumbs_down", "regenerate", "short_dwell", "edit", "reformulation", "thumbs_up", "copy"
]
IMPLICIT_SIGNALS: tuple[str, ...] = get_args(ImplicitSignal)
POSITIVE_SIGNALS = frozenset({"thumbs_up", "copy"})
# What a release marker says changed (docs/markers.md): the app itself, or one component of it. A
# label value of ragmon_release_component_change_timestamp_seconds and of the triage annotation.
ReleaseComponent = Literal[
    "app", "generator_model", "embedding_model", "reranker", "index", "prompt", "provider"
]
RELEASE_COMPONENTS: tuple[str, ...] = get_args(ReleaseComponent)
DEFAULT_COMPONENT: ReleaseComponent = "app"
# The stored record's layout version (StoredEvent.schema_version, the schema header).
SchemaVersion = Literal[1]
SCHEMA_VERSION: SchemaVersion = get_args(SchemaVersion)[0]

# The intent label's closed set when a worker's config names none (metrics, faithfulness and exclusion
# workers alike, so the per-intent guardrails join their series on the same values; the rest is `other`,
# a trace without an intent `none`). docs/intents.md counts the series one intent adds.
DEFAULT_INTENTS: tuple[str, ...] = ("billing", "troubleshooting", "product_info", "account", "policy")

# The variant a trace or release names when it names none, and a trace's sample rate when it
# gives none (every request traced).
DEFAULT_VARIANT = "production"
DEFAULT_SAMPLE_RATE = 1.0

# -- patterns ------------------------------------------------------------------------------------
# pydantic matches with Rust's regex, where `$` is the end of the text; views.py and fast.py match
# with Python's re through whole_pattern (`\Z`), where `$` also matches before a final newline.

# Identifiers travel into Redis keys and Kafka keys: printable, no whitespace.
ID_CHARS = "A-Za-z0-9._:/@#+=-"
ID_PATTERN = rf"^[{ID_CHARS}]+$"
NOT_ID_CHAR = rf"[^{ID_CHARS}]"  # any character an identifier cannot hold
# Names become Prometheus label values (after the closed-set mapping): lower-case slugs.
NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]*$"
STAGE_NAME = r"[a-z][a-z0-9_]*"
STAGE_PATTERN = rf"^{STAGE_NAME}$"
STAGE_NAMES_BY_LINE = rf"{STAGE_NAME}(?:\n{STAGE_NAME})*"  # stage names joined by line breaks

# The envelope as nearly every client writes it: a canonical (lower-case, hyphenated) UUID and an
# RFC 3339 timestamp (the API reads those directly; EventEnvelope judges every other form).
UUID_TEXT = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
UUID_TEXT_LEN = 36
CANONICAL_UUID = rf"^{UUID_TEXT}\Z"
CANONICAL_UUIDS_BY_LINE = rf"{UUID_TEXT}(?:\n{UUID_TEXT})*"  # canonical UUIDs joined by line breaks
RFC3339 = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)\Z"
# RFC3339 in parts (seconds, fraction, offset), ASCII digits only: stricter.
RFC3339_PARTS = (
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]{1,6}))?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})\Z"
)


def whole_pattern(pattern: str) -> str:
    r"""`pattern` (ending in `$`, pydantic's form) for Python's re: `\Z` ends the text."""
    return pattern.removesuffix("$") + r"\Z"


# -- numeric limits ------------------------------------------------------------------------------

# The largest finite float: JSON numbers beyond it decode as inf, refused by a view's bounds.
MAX_FINITE_FLOAT = 1.7976931348623157e308
# Metadata integers the API's fast structs read (int64; orjson reads a larger one as a float).
MIN_FAST_INT = -(2**63)
MAX_FAST_INT = 2**63 - 1
MIN_SAMPLE_RATE_EXCLUSIVE = 0.0  # sample_rate is in (0, 1]
MAX_SAMPLE_RATE = 1.0

MAX_ID_LEN = 128
MAX_NAME_LEN = 64
MAX_QUERY_CHARS = 16_384
MAX_ANSWER_CHARS = 32_768
MAX_DOCUMENT_CHARS = 32_768
MAX_DOCUMENTS = 100
MAX_CANDIDATES = 500
MAX_GOLD_IDS = 100
MAX_CITATIONS = 100
MAX_PREDICATES = 32
MAX_METADATA_KEYS = 64
MAX_METADATA_KEY_LEN = 128
MAX_METADATA_STR_LEN = 1_024
MAX_METADATA_LIST_LEN = 64
MAX_EMBEDDING_DIM = 4_096
MAX_TIMING_STAGES = 32
MAX_TIMING_MS = 3_600_000.0  # an hour: anything longer is a clock bug, not a slow stage
MAX_TOKENS = 10_000_000
MAX_COST_USD = 10_000.0
MAX_NOTE_CHARS = 4_096
MAX_FEEDBACK_VALUE = 1e9

# Envelope and transport limits (the API enforces these before parsing).
MAX_EVENTS_PER_BATCH = 1_000
MAX_BODY_BYTES = 10 * 1024 * 1024
MAX_DECOMPRESSED_BYTES = 20 * 1024 * 1024
# JSON nested deeper than this is refused whole (400, rule max_json_depth) on /v1/events and
# /v1/traces, before it is parsed: a v1 event is at most 10 levels deep, an OTLP JSON span with
# nested attribute values a few dozen.
MAX_JSON_DEPTH = 64
# One Kafka record (a stored event, or one trace's spans) is at most this many bytes: the API
# refuses a bigger one alone, and ragmon creates its topics with max.message.bytes to match.
MAX_RECORD_BYTES = 1_000_000
# Entries of one OTLP export: each costs a parse and a step although it may hold no span.
OTLP_MAX_RESOURCE_ENTRIES = 1_000
OTLP_MAX_SCOPE_ENTRIES = 2_000

# Timestamps outside [now - MAX_EVENT_AGE, now + MAX_CLOCK_SKEW] are rejected at
# ingestion: older ones would land in windows that have already been alerted on.
MAX_EVENT_AGE_S = 7 * 24 * 3600
MAX_CLOCK_SKEW_S = 300
