"""Poison or outage: what an exception raised while handling records means.

An outage (Redis, the broker, a socket timing out) is retried with the whole
batch and never dead-lettered. A poison record is one whose handling raises
however often it is retried: a RecursionError on nested client JSON, a
ValueError or TypeError from pure code on input nobody foresaw, a derived
record the broker can never take. Retrying it would stall its partition for
every tenant, so the runtime isolates it (workers/runtime/consumer.py) and
dead-letters it alone with its reason. An exception of any other type is an
outage: when unsure, retry rather than drop.
"""

from __future__ import annotations

import redis
from kafka.errors import KafkaError

from workers.runtime.emitter import EmitFailed, RecordTooLarge
from workers.runtime.reasons import DeadLetterReason

OUTAGES: tuple[type[BaseException], ...] = (redis.RedisError, KafkaError, EmitFailed, OSError)
POISON: tuple[type[BaseException], ...] = (
    RecordTooLarge,
    RecursionError,
    ValueError,
    TypeError,
    LookupError,
    AttributeError,
    ArithmeticError,
    AssertionError,
)
DETAIL_CHARS = 300


def is_poison(exc: BaseException) -> bool:
    return (
        isinstance(exc, RecordTooLarge)
        or (isinstance(exc, POISON) and not isinstance(exc, OUTAGES))
        or _is_database_data_error(exc)
    )


def _is_database_data_error(exc: BaseException) -> bool:
    """PostgreSQL refusing a value (psycopg's DataError: a NUL in text, a number out of range, an
    untranslatable character) refuses it however often it is sent; a lost connection is an OperationalError,
    an outage. Found by name so the runtime imports no database driver."""
    return any(c.__name__ == "DataError" and c.__module__.startswith("psycopg") for c in type(exc).__mro__)


def poison_reason(exc: BaseException) -> DeadLetterReason:
    return (
        DeadLetterReason.DERIVED_TOO_LARGE
        if isinstance(exc, RecordTooLarge)
        else DeadLetterReason.PROCESSING_FAILED
    )


def poison_detail(exc: BaseException) -> str:
    """For the dead letter's detail header and the log (operators), never a metric label."""
    return f"{type(exc).__name__}: {str(exc)[:DETAIL_CHARS]}"
