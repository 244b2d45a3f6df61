"""What happened to every event: handed out, then accepted, rejected or failed.

Only the facts are kept (not the bodies with their texts and embeddings), so
a long run with a manifest stays small. Senders record outcomes from several
threads.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from service.simulate.records import Facts, SimEvent

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
    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self.errors: list[dict[str, str]] = []
        self.error_counts: Counter[str] = Counter()

    def handed_out(self, event: SimEvent) -> None:
        with self._lock:
            self._entries[event.id] = Entry(event.type, event.tenant, event.facts)

    def settle(self, event_id: str, status: str, error: str | None = None) -> None:
        with self._lock:
            entry = self._entries[event_id]
            entry.status = status
            if error is not None:
                self.error_counts[f"{entry.type}: {error}"[:200]] += 1
                if len(self.errors) < MAX_ERRORS_KEPT:
                    self.errors.append({"id": event_id, "type": entry.type, "status": status, "error": error})

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries.values())

    def status_of(self, event_id: str) -> str | None:
        with self._lock:
            entry = self._entries.get(event_id)
            return entry.status if entry else None

    def counts(self) -> dict[str, Counter[str]]:
        """Events by outcome and type; `sent` counts every event handed to a sender."""
        out: dict[str, Counter[str]] = {"sent": Counter(), ACCEPTED: Counter(), REJECTED: Counter(), FAILED: Counter()}
        for entry in self.entries():
            out["sent"][entry.type] += 1
            if entry.status in out:
                out[entry.status][entry.type] += 1
        return out
