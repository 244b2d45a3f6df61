"""What the exclusion worker keeps in Redis, and its keys.

Keys are per tenant and trace id (a tenant is a slug without ':', so the key
is unambiguous even though trace ids may contain ':'):

- `sample`: the evaluated sample (predicate field/op, each eligible
  candidate's failing predicate indexes, ineligible ids) and the ranked ids
  of the retrieval metrics (the candidates in the app's order and the
  context, each id once: at most MAX_CANDIDATES + MAX_DOCUMENTS ids of at
  most MAX_ID_LEN characters), kept for a late label. No metadata values
  are stored. A layout-1 entry (written before the ranked ids were kept) is
  still read: its late label counts for exclusions, not for the retrieval
  metrics.
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
STATE_VERSION = 2
LABEL_VERSION = 1
_READABLE_SAMPLES = (1, 2)


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
    # Ranked ids (each at its first place) for the retrieval metrics; None: not kept (a layout-1 entry).
    candidate_ids: tuple[str, ...] | None = None
    context_ids: tuple[str, ...] | None = None
    release: str | None = None  # the trace's release (retrieval metrics per release); older entries lack it


def encode_sample(
    variant: str,
    intent: str | None,
    sample: PreparedSample,
    candidate_ids: tuple[str, ...] = (),
    context_ids: tuple[str, ...] = (),
    release: str | None = None,
) -> bytes:
    return orjson.dumps(
        {
            "v": STATE_VERSION,
            "variant": variant,
            "intent": intent,
            "predicates": [[p.field, p.op] for p in sample.predicates],
            "failures": sample.failures,
            "not_entitled": sorted(sample.not_entitled),
            "candidates": candidate_ids,
            "context": context_ids,
            "release": release,
        }
    )


def decode_sample(raw: bytes | None) -> StoredSample | None:
    """None when absent, or written by a version whose layout this one does not read
    (after a deploy, an old entry then waits for its label like a missing trace)."""
    if raw is None:
        return None
    data = orjson.loads(raw)
    if not isinstance(data, dict) or data.get("v") not in _READABLE_SAMPLES:
        return None
    sample = PreparedSample(
        predicates=tuple(PredicateRef(field, op) for field, op in data["predicates"]),
        failures={doc_id: tuple(idx) for doc_id, idx in data["failures"].items()},
        not_entitled=frozenset(data["not_entitled"]),
    )
    if data["v"] == 1:
        return StoredSample(data["variant"], data["intent"], sample)
    candidates, context = tuple(data["candidates"]), tuple(data["context"])
    return StoredSample(data["variant"], data["intent"], sample, candidates, context, data.get("release"))


def encode_label(gold_ids: list[str]) -> bytes:
    return orjson.dumps({"v": LABEL_VERSION, "gold_ids": gold_ids})


def decode_label(raw: bytes | None) -> list[str] | None:
    if raw is None:
        return None
    data = orjson.loads(raw)
    if not isinstance(data, dict) or data.get("v") != LABEL_VERSION:
        return None
    return list(data["gold_ids"])
