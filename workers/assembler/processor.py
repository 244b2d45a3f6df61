"""The assembler on the shared runtime: spans- and logs-topic records in, assembled trace and feedback events out.

The runtime decodes the spans topic's protobuf records with its spans decoder
(workers/runtime/records.py, as for the forwarder): a record that is not a spans record is
dead-lettered by the runtime (`invalid_spans`) and never reaches `process`. `process` stores
the spans in Redis and acknowledges the feedback events they carry before the runtime commits;
`tick` assembles the traces that are due (workers/assembler/assembler.py). Logs-topic records
(POST /v1/logs) are decoded by workers/assembler/logs.py and stored beside their trace's spans. A poison record in
`process` is isolated by the runtime; a poison trace in `tick` is dead-lettered by the assembler.
"""

from __future__ import annotations

from service.contracts.logs import LOGS_EVENT_TYPE, LogsRecord
from service.contracts.spans import SPANS_EVENT_TYPE
from workers.assembler.assembler import WORKER, Assembler
from workers.assembler.logs import decode_logs_subscription
from workers.runtime.contract import Processor
from workers.runtime.records import Subscription, decode_spans_record
from workers.runtime.types import Event, Rejection


class AssemblerProcessor(Processor):
    name = WORKER

    def __init__(self, assembler: Assembler, spans_topic: str, logs_topic: str | None = None) -> None:
        self.assembler = assembler
        self.subscriptions = (Subscription(spans_topic, SPANS_EVENT_TYPE, decode_spans_record),)
        if logs_topic is not None:
            self.subscriptions += (Subscription(logs_topic, LOGS_EVENT_TYPE, decode_logs_subscription),)

    def process(self, events: list[Event]) -> list[Rejection]:
        logs = [event.body for event in events if isinstance(event.body, LogsRecord)]
        if logs:
            self.assembler.store_logs(logs)
            self.assembler.store_spans(
                [event.body for event in events if not isinstance(event.body, LogsRecord)]
            )
        else:
            self.assembler.store_spans([event.body for event in events])
        return []

    def tick(self, now: float) -> None:
        self.assembler.tick(now)
