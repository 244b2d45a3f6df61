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

# Timestamps outside [now - MAX_EVENT_AGE, now + MAX_CLOCK_SKEW] are rejected at
# ingestion: older ones would land in windows that have already been alerted on.
MAX_EVENT_AGE_S = 7 * 24 * 3600
MAX_CLOCK_SKEW_S = 300
