"""A worker for runtime tests: its effects in Redis record what the runtime delivered.

- `ragmon:probe:effect` (hash): event id -> pid of the process whose effect
  landed first (HSETNX: the idempotent effect a real worker would keep);
- `ragmon:probe:attempts` (hash): event id -> how many times process() saw it
  (the non-idempotent view, to measure redelivery);
- a trace whose query text is "reject me" is returned as a Rejection;
- one whose query text is "raise me" makes process() raise RecursionError (a poison record), and one
  whose text is "too large" makes it emit a derived record over the broker's per-record size.
PROBE_DELAY_S slows every batch so a test can kill a process mid-stream;
PROBE_TICK_REDIS=1 makes tick() call Redis (INCR ragmon:probe:ticks), as
periodic work of a real worker does.
"""

from __future__ import annotations

import os
import time
from typing import Any

from workers.runtime.app import WorkerContext, WorkerSpec, main_for
from workers.runtime.config import NoConfig
from workers.runtime.contract import Processor
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import Event, Rejection


class ProbeProcessor(Processor):
    name = "probe"
    event_types = ("trace", "feedback")

    def __init__(self, ctx: WorkerContext[Any]) -> None:
        self.redis = ctx.redis
        self.emitter = ctx.emitter
        self.derived_topic = ctx.settings.topics.scores
        self.delay = float(os.environ.get("PROBE_DELAY_S", "0"))
        self.pid = str(os.getpid())
        self.tick_redis = os.environ.get("PROBE_TICK_REDIS") == "1"

    def process(self, events: list[Event]) -> list[Rejection]:
        rejected = []
        pipe = self.redis.pipeline(transaction=False)
        for e in events:
            pipe.hincrby("ragmon:probe:attempts", e.id, 1)
            text = e.body.query.text if e.type == "trace" else ""
            if text == "raise me":
                raise RecursionError("maximum recursion depth exceeded (probe rule)")
            if text == "too large":
                self.emitter.emit(self.derived_topic, None, b"x" * (2 * 1024 * 1024))
            if text == "reject me":
                rejected.append(
                    Rejection(e, DeadLetterReason.INVALID_BODY, "query.text: 'reject me' (probe rule)")
                )
            else:
                pipe.hsetnx("ragmon:probe:effect", e.id, self.pid)
        pipe.execute()
        if self.delay:
            time.sleep(self.delay)
        return rejected

    def tick(self, now: float) -> None:
        if self.tick_redis:
            self.redis.incr("ragmon:probe:ticks")


if __name__ == "__main__":
    main_for(WorkerSpec("probe", ProbeProcessor, NoConfig))
