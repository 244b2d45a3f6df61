"""Consumer lag per assigned partition, the same way for every consumer loop."""

from __future__ import annotations

import logging

from kafka import KafkaConsumer
from kafka.errors import KafkaError

from workers.runtime.metrics import RuntimeMetrics

log = logging.getLogger("ragmon.worker")


def measure_lag(consumer: KafkaConsumer, metrics: RuntimeMetrics, worker: str) -> None:
    assignment = list(consumer.assignment())
    if not assignment:
        return
    try:
        ends = consumer.end_offsets(assignment)
    except KafkaError as exc:
        log.debug("lag not measured: %s", exc)
        return
    for tp in assignment:
        try:
            position = consumer.position(tp)
        except KafkaError:
            continue
        # The fetch high watermark is exact; ListOffsets can lag behind it
        # (Tansu answers the last batch's base offset + 1), so take the larger.
        end = max(ends.get(tp) or 0, consumer.highwater(tp) or 0, position)
        metrics.lag.labels(worker, tp.topic, str(tp.partition)).set(end - position)
