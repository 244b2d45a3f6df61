"""Hard limits of the v1 wire contract.

They bound what one event can cost downstream (memory in a worker, tokens in
the faithfulness scorer, cardinality in Redis) and are part of the contract:
an app team can rely on them and the JSON Schema carries them.
"""

from __future__ import annotations

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
