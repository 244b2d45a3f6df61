"""The simulator's events as the API would store them, for tests that feed a worker through Kafka."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from service.contracts.stored import stored_document
from service.simulate.records import SimEvent


def stored_record(sim: SimEvent, anchor: datetime) -> dict[str, Any]:
    """The Kafka record value the API would write for a simulated event, `anchor` the scenario's start."""
    return stored_document(
        sim.id,
        sim.type,
        sim.tenant,
        (anchor + timedelta(seconds=sim.at_s)).isoformat(),
        datetime.now(UTC).isoformat(),
        sim.body,
    )
