"""The assembler on the shared runtime: spans-topic records in, assembled trace and feedback events out.

The runtime decodes the spans topic's protobuf records with its spans decoder
(workers/runtime/records.py, as for the forwarder): a record that is not a spans record is
dead-lettered by the runtime (`invalid_spans`) and never reaches `process`. `process` stores
the spans in Redis and acknowledges the feedback events they carry before the runtime commits;
`tick` assembles the traces that are due (workers/assembler/assembler.py). A poison record in
`process` is isolated by the runtime; a poison trace in `tick` is dead-lettered by the assembler.
"""

from __future__ import annotations

from service.contracts.spans import SPANS_EVENT_TYPE
from workers.assembler.assembler import WORKER, Assembler
from workers.runtime.contract import Processor
from workers.runtime.records import Subscription, decode_spans_record
from workers.runtime.types import Event, Rejection


class AssemblerProcessor(Processor):
    name = WORKER

    def __init__(self, assembler: Assembler, spans_topic: str) -> None:
        self.assembler = assembler
        self.subscriptions = (Subscription(spans_topic, SPANS_EVENT_TYPE, decode_spans_record),)

    def process(self, events: list[Event]) -> list[Rejection]:
        self.assembler.store_spans([event.body for event in events])
        return []

    def tick(self, now: float) -> None:
        self.assembler.tick(now)
