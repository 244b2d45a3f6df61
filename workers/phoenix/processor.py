"""The Phoenix exporter: score events from the scores topic become Phoenix annotations.

Per batch: find each trace's root span (and retriever documents) in Phoenix,
write the annotations with `sync=true`, so Phoenix has stored them when it
answers, and park the scores whose trace is not there yet in Redis
(workers/phoenix/waiting.py). Only then does the runtime commit the offsets:
a Phoenix or Redis outage raises, the runtime retries the batch with backoff
and nothing is lost or dead-lettered. Re-sending is harmless (annotations
upsert on their identifier), and metrics are recorded once the whole batch
succeeded, so a retried batch is not counted twice.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent, ImplicitSignalEvent
from workers.phoenix.annotations import (
    Plan,
    Planned,
    TraceSpans,
    phoenix_trace_id,
    plan_exclusion,
    plan_faithfulness,
)
from workers.phoenix.gateway import PhoenixGateway, PhoenixRejected, PhoenixUnavailable
from workers.phoenix.metrics import PhoenixMetrics
from workers.phoenix.settings import PhoenixSettings
from workers.phoenix.waiting import SCORE_EVENT, ScoreEvent, Waiting, WaitingRoom
from workers.runtime.contract import Processor
from workers.runtime.types import Event, Rejection

log = logging.getLogger("ragmon.worker.phoenix")
RETRY_BATCH = 500  # waiting scores retried per tick


@dataclass
class Done:
    """What a batch did, recorded in metrics only after every step of it succeeded."""

    missing: list[ScoreEvent] = field(default_factory=list)  # their trace is not in Phoenix (yet)
    written: list[tuple[Planned, str, float]] = field(default_factory=list)  # (annotation, outcome, acked at)
    skipped: list[tuple[ScoreEvent, str]] = field(default_factory=list)  # (score, outcome)
    documents_not_found: int = 0


def waiting_id(score: ScoreEvent) -> str:
    """A waiting score's member: score event ids derive from the client's event id, so the tenant is part of it.

    Entries parked by the version before (the bare event id) are still read and retried (_retry_waiting).
    """
    return f"{score.tenant}/{score.event_id}"


def _kind(score: ScoreEvent) -> str:
    return "faithfulness" if isinstance(score, FaithfulnessScoreEvent) else "false_exclusion"


class PhoenixExporter(Processor):
    name = "phoenix"
    event_types: tuple[str, ...] = ("score",)  # the scores topic, decoded by workers/runtime/decode.py

    def __init__(
        self,
        settings: PhoenixSettings,
        gateway: PhoenixGateway,
        waiting: WaitingRoom,
        metrics: PhoenixMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._gateway = gateway
        self._waiting = waiting
        self._metrics = metrics
        self._clock = clock
        self._next_retry = 0.0

    def close(self) -> None:
        self._gateway.close()

    def process(self, events: list[Event]) -> list[Rejection]:
        now = self._clock()
        # implicit signals share the scores topic; they are not evaluations Phoenix shows
        done = self.export([e.body for e in events if not isinstance(e.body, ImplicitSignalEvent)])
        missing = done.missing
        if self._settings.span_wait_s > 0:
            waiting = [Waiting(waiting_id(s), now, s.model_dump_json()) for s in missing]
            done.skipped += [(missing[i], "waiting_full") for i in self._waiting.park(waiting, now)]
        else:
            done.skipped += [(s, "trace_not_found") for s in missing]
        self._record(done)
        return []

    def tick(self, now: float) -> None:
        if now < self._next_retry:
            return
        # Phoenix or Redis down raises: the runtime's outage policy (workers/runtime/outage.py) retries
        # tick with backoff and keeps the worker not ready meanwhile; the leased entries come due again.
        self._retry_waiting(now)
        self._metrics.waiting.set(self._waiting.size())
        self._next_retry = now + min(self._settings.retry_interval_s, 5.0)

    def _retry_waiting(self, now: float) -> None:
        entries = self._waiting.take_due(now, RETRY_BATCH)
        if not entries:
            return
        scores: list[ScoreEvent] = []
        entry_of: dict[
            str, Waiting
        ] = {}  # by (tenant, event id); the entry's member may be of the old format
        for w in entries:
            try:
                score = SCORE_EVENT.validate_json(w.score_json)
            except ValidationError:
                log.error("dropping waiting score %s: it no longer validates", w.event_id)
                continue
            scores.append(score)
            entry_of[waiting_id(score)] = w
        done = self.export(scores)
        expired = [
            s for s in done.missing if now - entry_of[waiting_id(s)].first_seen >= self._settings.span_wait_s
        ]
        still = {entry_of[waiting_id(s)].event_id for s in done.missing} - {
            entry_of[waiting_id(s)].event_id for s in expired
        }
        self._waiting.done([w.event_id for w in entries if w.event_id not in still])
        done.skipped += [(s, "trace_not_found") for s in expired]
        self._record(done)

    def export(self, scores: Sequence[ScoreEvent]) -> Done:
        """Annotate every score whose trace Phoenix has; `missing` are those whose trace it does not have (yet)."""
        by_project: dict[str, list[tuple[str, ScoreEvent]]] = defaultdict(list)
        done = Done()
        for score in scores:
            tid = phoenix_trace_id(score.trace_id)
            if tid is None:
                done.skipped.append((score, "untraceable"))
            else:
                by_project[self._settings.project_for(score.tenant)].append((tid, score))
        plan = Plan()
        for project, group in by_project.items():
            with_docs = [tid for tid, s in group if isinstance(s, ExclusionResultEvent) and s.excluded_gold]
            try:
                found = self._gateway.find_traces(project, sorted({tid for tid, _ in group}), with_docs)
            except (
                PhoenixRejected
            ) as exc:  # e.g. a project name Phoenix cannot take: no retry will place these
                log.error("Phoenix refused the span lookup in project %r: %s", project, exc)
                done.skipped += [(s, "rejected") for _, s in group]
                continue
            for tid, score in group:
                trace = found.get(tid)
                if trace is None or trace.root is None:
                    done.missing.append(score)
                else:
                    self._plan(score, trace, plan)
        self._write(plan, done)
        done.documents_not_found = plan.documents_not_found
        return done

    @staticmethod
    def _plan(score: ScoreEvent, trace: TraceSpans, plan: Plan) -> None:
        if isinstance(score, FaithfulnessScoreEvent):
            assert trace.root is not None
            plan_faithfulness(score, trace.root, plan)
        else:
            plan_exclusion(score, trace, plan)

    def _write(self, plan: Plan, done: Done) -> None:
        step = self._settings.max_annotations_per_request
        for planned, write in (
            (plan.spans, self._gateway.write_span_annotations),
            (plan.documents, self._gateway.write_document_annotations),
        ):
            for i in range(0, len(planned), step):
                self._write_chunk(planned[i : i + step], write, done)

    def _write_chunk(
        self, chunk: list[Planned], write: Callable[[list[dict[str, Any]]], None], done: Done
    ) -> None:
        try:
            write([p.payload for p in chunk])
        except PhoenixUnavailable:
            for p in chunk:
                self._metrics.failed_attempts.labels(p.kind).inc()
            raise
        except PhoenixRejected as exc:
            log.error("Phoenix refused %d annotations: %s", len(chunk), exc)
            done.written += [(p, "rejected", 0.0) for p in chunk]
            return
        acknowledged = self._clock()
        done.written += [(p, "sent", acknowledged) for p in chunk]

    def _record(self, done: Done) -> None:
        """Metrics of a finished batch: counted only once all of it succeeded, so a retry never counts twice."""
        for p, outcome, acknowledged in done.written:
            self._metrics.annotations.labels(p.kind, outcome).inc()
            if outcome == "sent":
                scored = (
                    datetime.fromisoformat(p.payload["metadata"]["scored_at"]).astimezone(UTC).timestamp()
                )
                self._metrics.delay_seconds.labels(p.kind).observe(max(0.0, acknowledged - scored))
        for score, outcome in done.skipped:
            self._metrics.annotations.labels(_kind(score), outcome).inc()
        self._metrics.annotations.labels("excluded_document", "document_not_found").inc(
            done.documents_not_found
        )
