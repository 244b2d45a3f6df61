"""The Phoenix exporter: score events from the scores topic become Phoenix annotations.

Per batch: find each trace's root span (and retriever documents) in Phoenix,
park the scores whose trace is not there yet (workers/phoenix/waiting.py),
then write the annotations with `sync=true`, so Phoenix has stored them when
it answers. Only then does the runtime commit the offsets: a Phoenix outage
raises, the runtime retries the batch with backoff and nothing is lost or
dead-lettered. Re-sending is harmless (annotations upsert on their
identifier), and metrics are counted only after the write succeeded.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
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
from workers.phoenix.waiting import Waiting, WaitingRoom
from workers.runtime.records import SCORE_EVENT, ScoreEvent, Subscription, decode_score_record
from workers.runtime.types import Event, Readiness, Rejection

log = logging.getLogger("ragmon.worker.phoenix")
RETRY_BATCH = 500  # waiting scores retried per tick


def _kind(score: ScoreEvent) -> str:
    return "faithfulness" if isinstance(score, FaithfulnessScoreEvent) else "false_exclusion"


class PhoenixExporter:
    name = "phoenix"
    event_types: tuple[str, ...] = ()

    def __init__(self, settings: PhoenixSettings, gateway: PhoenixGateway, waiting: WaitingRoom,
                 metrics: PhoenixMetrics, scores_topic: str, clock: Callable[[], float] = time.time) -> None:
        self.subscriptions = (Subscription(scores_topic, "score", decode_score_record),)
        self._settings = settings
        self._gateway = gateway
        self._waiting = waiting
        self._metrics = metrics
        self._clock = clock
        self._next_retry = 0.0

    def readiness(self) -> Readiness:
        # Phoenix being down is an outage of a batch (retried), not a reason to stop consuming.
        return Readiness(True)

    def close(self) -> None:
        self._gateway.close()

    def process(self, events: list[Event]) -> list[Rejection]:
        now = self._clock()
        missing = self.export([e.body for e in events])
        waiting = [Waiting(str(s.event_id), now, s.model_dump_json()) for s in missing]
        if self._settings.span_wait_s > 0:
            self._count(missing[len(missing) - self._waiting.park(waiting, now):], "waiting_full")
        else:
            self._count(missing, "trace_not_found")
        return []

    def tick(self, now: float) -> None:
        if now < self._next_retry:
            return
        self._next_retry = now + min(self._settings.retry_interval_s, 5.0)
        try:
            self._retry_waiting(now)
            self._metrics.waiting.set(self._waiting.size())
        except (PhoenixUnavailable, OSError) as exc:  # redis errors are OSErrors too: try again next tick
            log.warning("retrying waiting scores failed, next try in %.0fs: %s", self._settings.retry_interval_s, exc)
        except Exception as exc:  # a bug must not kill the consumer loop: it is logged with its trace
            log.exception("retrying waiting scores failed: %s", exc)

    def _retry_waiting(self, now: float) -> None:
        entries = self._waiting.take_due(now, RETRY_BATCH)
        if not entries:
            return
        scores: list[ScoreEvent] = []
        first_seen: dict[str, float] = {}
        for w in entries:
            try:
                scores.append(SCORE_EVENT.validate_json(w.score_json))
                first_seen[w.event_id] = w.first_seen
            except ValidationError:
                log.error("dropping waiting score %s: it no longer validates", w.event_id)
        missing = self.export(scores)
        expired = [s for s in missing if now - first_seen[str(s.event_id)] >= self._settings.span_wait_s]
        self._count(expired, "trace_not_found")
        still = {str(s.event_id) for s in missing} - {str(s.event_id) for s in expired}
        self._waiting.done([w.event_id for w in entries if w.event_id not in still])

    def export(self, scores: Sequence[ScoreEvent]) -> list[ScoreEvent]:
        """Annotate every score whose trace Phoenix has; return those whose trace it does not have (yet)."""
        by_project: dict[str, list[tuple[str, ScoreEvent]]] = defaultdict(list)
        untraceable: list[ScoreEvent] = []
        for score in scores:
            tid = phoenix_trace_id(score.trace_id)
            if tid is None:
                untraceable.append(score)
            else:
                by_project[self._settings.project_for(score.tenant)].append((tid, score))
        plan, missing = Plan(), []
        for project, group in by_project.items():
            with_docs = [tid for tid, s in group if isinstance(s, ExclusionResultEvent) and s.excluded_gold]
            try:
                found = self._gateway.find_traces(project, sorted({tid for tid, _ in group}), with_docs)
            except PhoenixRejected as exc:  # e.g. a project name Phoenix cannot take: no retry will place these
                log.error("Phoenix refused the span lookup in project %r: %s", project, exc)
                self._count([s for _, s in group], "rejected")
                continue
            for tid, score in group:
                trace = found.get(tid)
                if trace is None or trace.root is None:
                    missing.append(score)
                else:
                    self._plan(score, trace, plan)
        self._write(plan)
        self._count(untraceable, "untraceable")
        self._metrics.annotations.labels("excluded_document", "document_not_found").inc(plan.documents_not_found)
        return missing

    @staticmethod
    def _plan(score: ScoreEvent, trace: TraceSpans, plan: Plan) -> None:
        if isinstance(score, FaithfulnessScoreEvent):
            assert trace.root is not None
            plan_faithfulness(score, trace.root, plan)
        else:
            plan_exclusion(score, trace, plan)

    def _write(self, plan: Plan) -> None:
        step = self._settings.max_annotations_per_request
        for planned, write in ((plan.spans, self._gateway.write_span_annotations),
                               (plan.documents, self._gateway.write_document_annotations)):
            for i in range(0, len(planned), step):
                self._write_chunk(planned[i:i + step], write)

    def _write_chunk(self, chunk: list[Planned], write: Callable[[list[dict[str, Any]]], None]) -> None:
        try:
            write([p.payload for p in chunk])
        except PhoenixUnavailable:
            for p in chunk:
                self._metrics.failed_attempts.labels(p.kind).inc()
            raise
        except PhoenixRejected as exc:
            log.error("Phoenix refused %d annotations: %s", len(chunk), exc)
            for p in chunk:
                self._metrics.annotations.labels(p.kind, "rejected").inc()
            return
        acknowledged = self._clock()
        for p in chunk:
            self._metrics.annotations.labels(p.kind, "sent").inc()
            scored = datetime.fromisoformat(p.payload["metadata"]["scored_at"]).astimezone(UTC).timestamp()
            self._metrics.delay_seconds.labels(p.kind).observe(max(0.0, acknowledged - scored))

    def _count(self, scores: Sequence[ScoreEvent], outcome: str) -> None:
        for score in scores:
            self._metrics.annotations.labels(_kind(score), outcome).inc()
