"""What the exclusion worker keeps in Redis, and its keys.

Keys are per tenant and trace id (a tenant is a slug without ':', so the key
is unambiguous even though trace ids may contain ':'):

- `sample`: the evaluated sample (predicate field/op, each eligible
  candidate's failing predicate indexes, ineligible ids), kept for a late
  label. No metadata values are stored.
- `label`: gold ids of a label that arrived before its trace (labels and
  traces are keyed to different partitions, so either may be consumed first).
- `evaluated`: claims the trace-level counts (leaks, the proxy evaluation).
- `labelled`: claims the one evaluation with source `labels`.

Claims hold the id of the event that made them, so a retried batch can tell
its own claim from another event's.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from workers.exclusion.evaluate import PreparedSample
from workers.exclusion.predicates import PredicateRef

PREFIX = "ragmon:exclusion"
STATE_VERSION = 1


def sample_key(tenant: str, trace_id: str) -> str:
    return f"{PREFIX}:sample:{tenant}:{trace_id}"


def label_key(tenant: str, trace_id: str) -> str:
    return f"{PREFIX}:label:{tenant}:{trace_id}"


def evaluated_key(tenant: str, trace_id: str) -> str:
    return f"{PREFIX}:evaluated:{tenant}:{trace_id}"


def labelled_key(tenant: str, trace_id: str) -> str:
    return f"{PREFIX}:labelled:{tenant}:{trace_id}"


@dataclass(frozen=True)
class StoredSample:
    variant: str
    intent: str | None
    sample: PreparedSample


def encode_sample(variant: str, intent: str | None, sample: PreparedSample) -> bytes:
    return orjson.dumps(
        {
            "v": STATE_VERSION,
            "variant": variant,
            "intent": intent,
            "predicates": [[p.field, p.op] for p in sample.predicates],
            "failures": sample.failures,
            "not_entitled": sorted(sample.not_entitled),
        }
    )


def decode_sample(raw: bytes | None) -> StoredSample | None:
    """None when absent, or written by a version whose layout this one does not read
    (after a deploy, an old entry then waits for its label like a missing trace)."""
    if raw is None:
        return None
    data = orjson.loads(raw)
    if not isinstance(data, dict) or data.get("v") != STATE_VERSION:
        return None
    sample = PreparedSample(
        predicates=tuple(PredicateRef(field, op) for field, op in data["predicates"]),
        failures={doc_id: tuple(idx) for doc_id, idx in data["failures"].items()},
        not_entitled=frozenset(data["not_entitled"]),
    )
    return StoredSample(data["variant"], data["intent"], sample)


def encode_label(gold_ids: list[str]) -> bytes:
    return orjson.dumps({"v": STATE_VERSION, "gold_ids": gold_ids})


def decode_label(raw: bytes | None) -> list[str] | None:
    if raw is None:
        return None
    data = orjson.loads(raw)
    if not isinstance(data, dict) or data.get("v") != STATE_VERSION:
        return None
    return list(data["gold_ids"])
