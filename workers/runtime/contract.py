"""The worker contract: what a processor implements, and what the runtime guarantees around it.

Every worker is a `Processor` subclass run by the shared runtime
(workers/runtime/consumer.py) through one entry point (workers/runtime/app.py,
`main_for(WorkerSpec(...))`). docs/architecture.md, "Worker contract", is the
same text for readers of the docs.

What a processor implements
---------------------------
- `name` (class attribute): the worker's name; its consumer group is
  `<topic prefix>-<name>` and it labels every runtime metric.
- `event_types` (class attribute): the native event types whose topics it reads
  (`trace`, `feedback`, `release`, `label`, `score`).
- `subscriptions` (optional): topics of other records, each with the runtime
  decoder for them (workers/runtime/records.py: the raw OTLP spans topic).
- `views` (optional): event type -> a `service.contracts.views` struct holding
  only the fields the processor reads; the record is decoded once into it.
- `process(events) -> list[Rejection]` (required): apply the batch's effects.
  Return a `Rejection` (with a `DeadLetterReason`) for each event that is bad
  input; raise for an outage (Redis, PostgreSQL, a model or a collector
  unreachable). Every effect kept outside the process must be idempotent by
  event id: a batch is re-run after an outage and after a crash.
- `tick(now)` (optional, default: nothing): time-driven work, called at least
  once a second. Raise for an outage, exactly as `process` does; never catch
  one to carry on (count it in a metric of your own, then re-raise, if a
  dashboard needs it by worker).
- `readiness()` (optional, default: ready): not ready means "do not consume
  now" (a model still loading, a store not migrated). Called every loop.
- `close()` (optional, default: nothing): release what the processor owns
  (not the Redis client or the emitter: the runtime owns those).
- its config (`WorkerSpec.config`): one pydantic model, read once at start by
  the entry point (`load_worker_config`: the config file's section named after
  the worker, or the environment for a pydantic-settings model) and handed to
  `build(ctx)` as `ctx.config`.
- its metrics: every metric object in `workers/NAME/metrics.py`, registered on
  `ctx.registry`; the runtime's own series are `ragmon_worker_*`
  (workers/runtime/metrics.py, `ctx.metrics`).

What the runtime guarantees
---------------------------
- Decode once: each record is decoded (and validated) once, into the view or
  the contract model; a record that cannot be is dead-lettered with its reason
  and never reaches `process`.
- Dedupe: events whose id this worker already finished (done keys in Redis,
  workers/runtime/dedupe.py) are skipped; `process` sees each id as new.
- Emit, then commit last: after `process` returns, dead letters and every
  derived record (`ctx.emitter`) are produced and acknowledged, the ids are
  marked done, and only then are the batch's offsets committed. A crash
  anywhere before the commit redelivers the whole batch.
- Poison isolation: an exception of a poison type (workers/runtime/poison.py:
  ValueError, RecursionError, a derived record too large, ...) is about one
  record: the batch is halved until the one record that raises alone is found;
  it is dead-lettered (`processing_failed` or `derived_record_too_large`), the
  others are processed.
- One outage policy, for `process`, `tick` and `readiness` alike
  (workers/runtime/outage.py): any other exception is an outage. It is counted
  (`ragmon_worker_retries_total`), the worker turns not ready
  (`ragmon_worker_ready 0`, `/readyz` 503), nothing is committed or
  dead-lettered, and the same work is retried with exponential backoff
  (`RAGMON_WORKER_RETRY_INITIAL_S` to `RAGMON_WORKER_RETRY_MAX_S`) while the
  partitions are paused and the group membership kept. A failing `tick` also
  stops consumption: the next batch would meet the same outage.
- Dead-letter ratio: a batch that would push the share of dead letters past
  `RAGMON_WORKER_DLQ_MAX_RATIO` halts consumption (`ragmon_worker_halted`),
  without dead-lettering it; `tick` still runs on the state already accepted.
- SIGTERM: the in-flight batch is finished and committed, the group left,
  `close()` called, exit 0.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from workers.runtime.records import Subscription
from workers.runtime.types import READY, Event, Readiness, Rejection


class Processor(ABC):
    """The worker-specific part; one instance per worker process. See the module docstring."""

    name: ClassVar[str]
    event_types: tuple[str, ...] = ()
    subscriptions: tuple[Subscription, ...] = ()
    views: Mapping[str, type[Any]] = MappingProxyType({})

    @abstractmethod
    def process(self, events: list[Event]) -> list[Rejection]:
        """Apply the effects of a batch of new events; return rejections for bad input, raise on outages."""

    def tick(self, now: float) -> None:
        """Time-driven work (at least once a second); an exception is an outage, handled like process()'s."""
        return None

    def readiness(self) -> Readiness:
        """Whether the worker may consume now; the default is ready."""
        return READY

    def close(self) -> None:
        """Release what the processor owns, on shutdown."""
        return None
