"""Root span ids of OTLP traces, so an evaluation record names the span it evaluates (docs/otlp.md).

The exporter reads the spans topic beside the scores: for every span without a
parent it keeps `ragmon:evaluations:root:<tenant>:<trace id>` = the span id (hex)
in Redis for `root_span_ttl_s`. Setting it again is harmless (same value), so a
redelivered record changes nothing. A trace whose root span the worker has not
seen (a native trace, spans older than the TTL, spans still behind the scores)
gives a record without a span id.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis

from service.contracts.spans import SpanRecord

PREFIX = "ragmon:evaluations:root"


def root_key(tenant: str, trace_id: str) -> str:
    return f"{PREFIX}:{tenant}:{trace_id.lower()}"


def roots_of(record: SpanRecord) -> dict[str, str]:
    """key -> root span id (hex) for every parentless span of the record."""
    return {
        root_key(record.tenant, span.trace_id.hex() or record.trace_id): span.span_id.hex()
        for _, _, span in record.spans()
        if not span.parent_span_id and span.span_id
    }


class RootSpans:
    def __init__(self, client: redis.Redis, ttl_s: int) -> None:
        self._redis = client
        self._ttl_s = ttl_s

    def remember(self, roots: dict[str, str]) -> None:
        if not roots:
            return
        pipe = self._redis.pipeline(transaction=False)
        for key, span_id in roots.items():
            pipe.set(key, span_id, ex=self._ttl_s)
        pipe.execute()

    def find(self, keys: Iterable[str]) -> dict[str, bytes]:
        """key -> root span id (8 bytes) for the keys Redis knows."""
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        found: dict[str, bytes] = {}
        for key, value in zip(wanted, self._redis.mget(wanted), strict=True):
            if value:
                text = value.decode() if isinstance(value, bytes) else str(value)
                found[key] = bytes.fromhex(text)
        return found
