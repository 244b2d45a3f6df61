"""What happened to every event: handed out, then accepted, rejected or failed.

Counts by outcome and type are kept as they happen. The per-event facts the
manifest aggregates are kept only when asked (`keep=True`): an endless demo
run without a manifest must not grow without bound, so it forgets each event
once it is settled. Only the facts are kept, never the bodies with their
texts and embeddings. Senders settle outcomes from several threads.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from service.simulate.records import Facts, SimEvent

SENT = "sent"
ACCEPTED = "accepted"
REJECTED = "rejected"  # the API refused this event (207 result, or a 4xx for its batch)
FAILED = "failed"  # never acknowledged: retries exhausted or the network gave up
MAX_ERRORS_KEPT = 100


@dataclass(slots=True)
class Entry:
    type: str
    tenant: str
    facts: Facts
    status: str | None = None


class Ledger:
    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self._entries: dict[str, Entry] = {}
        self._counts: dict[str, Counter[str]] = {k: Counter() for k in (SENT, ACCEPTED, REJECTED, FAILED)}
        self._lock = threading.Lock()
        self.errors: list[dict[str, str]] = []
        self.error_counts: Counter[str] = Counter()

    def handed_out(self, event: SimEvent) -> None:
        with self._lock:
            self._entries[event.id] = Entry(event.type, event.tenant, event.facts)
            self._counts[SENT][event.type] += 1

    def settle(self, event_id: str, status: str, error: str | None = None, if_open: bool = False) -> None:
        """Record an event's outcome; `if_open` skips one already settled instead of raising."""
        with self._lock:
            entry = self._entries.get(event_id)
            if entry is None or entry.status is not None:
                if if_open:
                    return
                raise RuntimeError(f"event {event_id} settled twice, or never handed out")
            if not self.keep:
                del self._entries[event_id]
            entry.status = status
            self._counts[status][entry.type] += 1
            if error is not None:
                self.error_counts[f"{entry.type}: {error}"[:200]] += 1
                if len(self.errors) < MAX_ERRORS_KEPT:
                    self.errors.append({"id": event_id, "type": entry.type, "status": status, "error": error})

    def entries(self) -> list[Entry]:
        """Every event handed out (only those not yet settled when `keep` is off)."""
        with self._lock:
            return list(self._entries.values())

    def counts(self) -> dict[str, Counter[str]]:
        """Events by outcome and type; `sent` counts every event handed to a sender."""
        with self._lock:
            return {k: Counter(v) for k, v in self._counts.items()}
