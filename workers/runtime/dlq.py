"""Dead letters: the record, its reason, and where it came from, in headers.

DlqLimit halts a worker whose recent traffic is mostly dead letters: after a
bad deploy (a decoder bug, a contract mismatch) it is better to stop and page
than to drain the topic into the DLQ.
"""

from __future__ import annotations

from collections import deque

from service.contracts import topics as T
from workers.runtime.emitter import MAX_RECORD_BYTES
from workers.runtime.types import Emitter, SourceRecord

H_DLQ_TRUNCATED = (
    "ragmon-dlq-truncated"  # on a dead letter cut to fit the broker: the original length in bytes
)
# Room kept for the record's framing when a dead letter is cut to fit.
_DLQ_MARGIN = 16 * 1024


def dlq_headers(
    source: SourceRecord, headers: list[tuple[str, bytes]], reason: str, detail: str, worker: str
) -> list[tuple[str, bytes]]:
    kept = [(k, v) for k, v in headers if not k.startswith("ragmon-dlq-")]
    return kept + [
        (T.H_DLQ_REASON, reason.encode()),
        (T.H_DLQ_DETAIL, detail.encode()[:2048]),
        (T.H_DLQ_TOPIC, source.topic.encode()),
        (T.H_DLQ_PARTITION, str(source.partition).encode()),
        (T.H_DLQ_OFFSET, str(source.offset).encode()),
        (T.H_DLQ_WORKER, worker.encode()),
    ]


def fit_dead_letter(
    value: bytes,
    headers: list[tuple[str, bytes]],
    limit: int = MAX_RECORD_BYTES,
) -> tuple[bytes, list[tuple[str, bytes]]]:
    """A dead letter cut to fit the broker (the record it stands for may be what was too large).

    The cut record says so: `ragmon-dlq-truncated` holds its original length in bytes.
    """
    room = max(0, limit - _DLQ_MARGIN - sum(len(k) + len(v) for k, v in headers))
    if len(value) <= room:
        return value, headers
    return value[:room], [*headers, (H_DLQ_TRUNCATED, str(len(value)).encode())]


def emit_dead_letter(
    emitter: Emitter, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]
) -> None:
    """Emit one dead letter, cut to fit the emitter's per-record size (a dead letter must never be refused)."""
    limit = getattr(emitter, "max_record_bytes", MAX_RECORD_BYTES) - len(key or b"")
    value, headers = fit_dead_letter(value, headers, limit)
    emitter.emit(topic, key, value, headers)


class DlqLimitExceeded(Exception):
    pass


class DlqLimit:
    """Sliding window over the last `window` records: halt when the dead share exceeds `max_ratio`."""

    def __init__(self, max_ratio: float, window: int, min_messages: int) -> None:
        self.max_ratio = max_ratio
        self.min_messages = min_messages
        self._outcomes: deque[bool] = deque(maxlen=window)
        self._dead = 0

    def _push(self, dead: bool) -> None:
        if len(self._outcomes) == self._outcomes.maxlen and self._outcomes[0]:
            self._dead -= 1
        self._outcomes.append(dead)
        self._dead += dead

    def check(self, good: int, dead: int) -> None:
        """Account a batch; raise (before anything is dead-lettered) when over the limit."""
        snapshot = (list(self._outcomes), self._dead)
        for _ in range(good):
            self._push(False)
        for _ in range(dead):
            self._push(True)
        total = len(self._outcomes)
        if total >= self.min_messages and self._dead / total > self.max_ratio:
            ratio = self._dead / total
            self._outcomes = deque(snapshot[0], maxlen=self._outcomes.maxlen)
            self._dead = snapshot[1]
            raise DlqLimitExceeded(
                f"{ratio:.0%} of the last {total} records would be dead letters, over the limit of "
                f"{self.max_ratio:.0%}: halted without dead-lettering or committing this batch. "
                "Likely a bad deploy or a contract mismatch; read the dead-letter reasons in the logs, "
                "fix, and restart the worker (RAGMON_WORKER_DLQ_MAX_RATIO sets the limit)"
            )
