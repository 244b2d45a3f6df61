"""The drift worker's session signals: follow-ups, reformulations and how sessions end.

The drift worker does this check itself because it is where both embeddings are: the
app's own (query.embedding) and the pinned encoder's, which it computes anyway; no
other worker loads a model for it. Production traces with a session_id feed it
(a shadow run repeats production's query: it is not the user asking again).
docs/reformulations.md has the definitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import redis

from service.contracts import vocabulary as L
from service.contracts.scores import ImplicitSignalEvent, signal_event_id
from workers.drift.config import SessionsConfig
from workers.drift.metrics import DriftMetrics
from workers.drift.reformulation import REFORMULATED, compare, is_follow_up, session_outcome
from workers.drift.sessions import APP_FIELD, ENCODER_FIELD, Query, SessionStore
from workers.drift.views import DriftTrace, SessionFeedback
from workers.drift.windows import comparable, float32_embedding
from workers.runtime.labels import Children, ClosedSet
from workers.runtime.types import Event


@dataclass(frozen=True)
class SessionQuery:
    event: Event
    body: DriftTrace
    encoded: np.ndarray | None  # the pinned encoder's vector, when the encoder runs
    encoder_model: str = ""  # its model name with the wheel's version: an upgrade is another model
    app_vector: np.ndarray | None = None  # query.embedding as float32 when the caller converted it already


class SessionSignals:
    def __init__(
        self,
        config: SessionsConfig,
        store: SessionStore,
        metrics: DriftMetrics,
        client: redis.Redis,
        publish: Callable[[ImplicitSignalEvent], None] | None = None,
    ) -> None:
        """`publish`: where each reformulation goes as an implicit signal of the earlier trace (the scores
        topic, for the review store's signals against blind review); None publishes nothing."""
        self.config = config
        self.publish = publish
        self.store = store
        self.m = metrics
        self.redis = client
        self.intent = ClosedSet(config.intents)
        self.child = Children()

    @staticmethod
    def wants(body: DriftTrace) -> bool:
        return body.session_id is not None and body.variant == L.DEFAULT_VARIANT

    def _query(self, q: SessionQuery) -> Query:
        vectors: dict[str, np.ndarray] = {}
        query = q.body.query
        if query.embedding is not None and query.embedding_model is not None:
            app = q.app_vector if q.app_vector is not None else float32_embedding(query.embedding)
            if comparable(app):  # else it is compared on the encoder's, or not at all (as without one)
                vectors[APP_FIELD + query.embedding_model] = app
        if q.encoded is not None:
            vectors[ENCODER_FIELD + q.encoder_model] = np.asarray(q.encoded, dtype=np.float32)
        at = q.event.stored.timestamp.timestamp()
        return Query(q.event.id, q.body.trace_id, at, self.intent(q.body.intent), vectors)

    def observe(self, queries: list[SessionQuery], feedback: list[tuple[Event, SessionFeedback]]) -> None:
        """Swap the batch's queries in (one script call, in event order), compare each with the query it
        replaced, then mark the reformulations and write the feedback marks (a second round trip)."""
        built = [(q, self._query(q)) for q in queries]
        advanced_all = self.store.advance(
            [
                (q.event.tenant, str(q.body.session_id), query, q.event.stored.received_at.timestamp())
                for q, query in built
            ]
        )
        marks = self.redis.pipeline(transaction=False)
        reformulated: list[tuple[str, str, str]] = []
        for (q, query), advanced in zip(built, advanced_all, strict=True):
            tenant = q.event.tenant
            if advanced.status != "ok":  # duplicate or late: never compared, counted once as such
                self.child(self.m.session_queries, tenant, advanced.status).inc()
                continue
            previous = advanced.previous
            if previous is None:
                self.child(self.m.session_queries, tenant, "first").inc()
                continue
            if not is_follow_up(previous, query, self.config.window_s):
                self.child(self.m.session_queries, tenant, "after_window").inc()
                continue
            self.child(self.m.session_queries, tenant, "followup").inc()
            got = compare(previous, query, self.config.min_cosine)
            self.child(self.m.followups, tenant, previous.intent, got.embedding, got.outcome).inc()
            if got.outcome == REFORMULATED:
                reformulated.append((tenant, str(q.body.session_id), query.event_id))
                if self.publish is not None:
                    self.publish(reformulation_signal(q.event, previous.trace_id, q.body.trace_id))
        self.store.queue_mark_reformulations(marks, reformulated)
        for event, f in feedback:
            mark = f.mark
            if mark is not None:
                self.store.queue_feedback(
                    marks, event.tenant, f.trace_id, mark, event.stored.timestamp.timestamp()
                )
        if len(marks):
            marks.execute()

    def tick(self, now: float) -> None:
        for ended in self.store.iter_ended(now, self.config.expire_batch):
            outcome = session_outcome(
                self.store.feedback_of(ended.tenant, ended.trace_id), ended.reformulated
            )
            self.child(self.m.sessions_ended, ended.tenant, ended.intent, outcome).inc()


def reformulation_signal(followup: Event, about_trace_id: str, by_trace_id: str) -> ImplicitSignalEvent:
    """The implicit signal `reformulation` of the earlier trace; its id derives from the follow-up's event
    id, so a re-published signal is the same event (the review store keeps one row)."""
    source = followup.stored.id
    return ImplicitSignalEvent(
        event_id=signal_event_id(source, "reformulation"),
        source_event_id=source,
        tenant=followup.tenant,
        trace_id=about_trace_id,
        signal="reformulation",
        by_trace_id=by_trace_id,
        trace_timestamp=followup.stored.timestamp,
        scored_at=datetime.now(UTC),
    )
