"""Why a record went to the dead-letter topic: the one closed set for every worker.

The value is the `reason` label of `ragmon_worker_dead_letters_total` and the
`ragmon-dlq-reason` header, so it never carries free text; the detail (field
and rule) goes in the `ragmon-dlq-detail` header and the log.
"""

from __future__ import annotations

from enum import StrEnum


class DeadLetterReason(StrEnum):
    UNDECODABLE = "undecodable"  # not JSON, not a JSON object, or a tombstone
    INVALID_ENVELOPE = "invalid_envelope"  # id, type, tenant or timestamps break the contract
    INVALID_BODY = "invalid_body"  # the body breaks the contract, or a rule a worker checks on it
    UNEXPECTED_TYPE = (
        "unexpected_event_type"  # a type this consumer does not read (e.g. on another type's topic)
    )
    INVALID_PREDICATE = "invalid_predicate"  # a retrieval filter the exclusion worker cannot evaluate
    INVALID_SCORE = "invalid_score"  # a score event on the scores topic that breaks its contract
    INVALID_SPANS = "invalid_spans"  # a spans-topic record that is not a TracesData protobuf
    PROCESSING_FAILED = (
        "processing_failed"  # handling this one record raised (e.g. RecursionError): a poison record
    )
    DERIVED_TOO_LARGE = (
        "derived_record_too_large"  # what this record yields can never fit the broker's record size
    )
