"""The drift worker's processor: trace events in, query embeddings into shared windows.

process() embeds each sampled trace's query (the pinned encoder on query.text,
and the app's own query.embedding as a separate signal), files every embedding
under its (tenant, signal, intent, model, dimension) key and reports a new
model as a reset. tick() runs the tests that are due (see scheduler.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import redis
from prometheus_client import CollectorRegistry

from service.contracts.scores import ImplicitSignalEvent
from workers.drift import encoder as pinned
from workers.drift.config import ALL_INTENTS, DriftConfig
from workers.drift.encoder import EncoderSlot, EncoderUnavailable
from workers.drift.followups import SessionQuery, SessionSignals
from workers.drift.metrics import DriftMetrics
from workers.drift.scheduler import DriftScheduler
from workers.drift.sessions import SessionStore
from workers.drift.signals import APP, ENCODER, ModelLabels, SignalKey, sampled_in
from workers.drift.views import VIEWS, DriftTrace, SessionFeedback
from workers.drift.windows import ModelChange, Observation, WindowStore, comparable, float32_embedding
from workers.runtime.contract import Processor
from workers.runtime.labels import OTHER
from workers.runtime.types import READY, Event, Readiness, Rejection, split_by_body

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Query:
    event: Event
    body: DriftTrace
    intents: tuple[str, ...]
    received_at: float
    sampled: bool = True  # feeds the drift windows
    in_session: bool = False  # feeds its session's state (docs/reformulations.md)
    app_vector: np.ndarray | None = None  # query.embedding as float32, converted once for both uses


class DriftProcessor(Processor):
    name = "drift"
    event_types: tuple[str, ...] = ("trace", "feedback")
    views = VIEWS

    def __init__(
        self,
        config: DriftConfig,
        client: redis.Redis,
        registry: CollectorRegistry,
        encoder: EncoderSlot | None = None,
        publish: Callable[[ImplicitSignalEvent], None] | None = None,
    ) -> None:
        """`publish`: where reformulations go as implicit signals (the scores topic; None: nowhere)."""
        if config.encoder.enabled and encoder is None:
            raise ValueError("encoder.enabled is true but no encoder slot was given")
        self.config = config
        self.encoder = encoder if config.encoder.enabled else None
        self.metrics = DriftMetrics(registry)
        self.store = WindowStore(
            client,
            config.key_prefix,
            config.reference_size,
            config.current_size,
            config.max_signals_per_stream,
        )
        known = {m: m for m in config.app_embeddings.models}
        if self.encoder is not None:
            try:
                known[pinned.pinned_model_name()] = pinned.LABEL
            except EncoderUnavailable as exc:  # readiness() reports it; the labels are moot then
                log.error("drift: %s", exc)
        self.labels = ModelLabels(known)
        self.scheduler = DriftScheduler(
            config, self.store, self.metrics, self.labels, np.random.default_rng(config.seed)
        )
        self._intents = frozenset(config.intents)
        self._variants = frozenset(config.variants)
        self._encoder_name, self._encoder_dim = "", 0
        self.sessions = (
            SessionSignals(
                config.sessions,
                SessionStore(client, config.key_prefix, config.sessions.idle_s, config.sessions.window_s),
                self.metrics,
                client,
                publish,
            )
            if config.sessions.enabled
            else None
        )

    def readiness(self) -> Readiness:
        if self.encoder is None:
            return READY
        ready = self.encoder.get() is not None
        self.metrics.encoder_ready.set(float(ready))
        if ready:
            return READY
        return Readiness(False, self.encoder.error or "loading the pinned encoder")

    def process(self, events: list[Event]) -> list[Rejection]:
        traces, rejections = split_by_body([e for e in events if e.type != "feedback"], DriftTrace)
        feedback, rejected = split_by_body([e for e in events if e.type == "feedback"], SessionFeedback)
        queries: list[_Query] = []
        for event, body in traces:
            in_session = self.sessions is not None and self.sessions.wants(body)
            if body.variant not in self._variants and not in_session:
                self.metrics.skipped.labels(event.tenant, "variant").inc()
                continue
            sampled = body.variant in self._variants and sampled_in(event.id, self.config.sample)
            if not sampled:
                self.metrics.skipped.labels(
                    event.tenant, "sampled_out" if body.variant in self._variants else "variant"
                ).inc()
                if not in_session:
                    continue
            intents = (ALL_INTENTS, body.intent) if body.intent in self._intents else (ALL_INTENTS,)
            received = event.stored.received_at.timestamp()
            emb = body.query.embedding
            vector = None if emb is None else float32_embedding(emb)
            queries.append(_Query(event, body, intents, received, sampled, in_session, vector))
        encoded = self._encode(queries)
        windowed = [(q, v) for q, v in zip(queries, encoded, strict=True) if q.sampled]
        observations = self._app_observations([q for q, _ in windowed]) + self._encoder_observations(windowed)
        if observations:
            outcomes, changes = self.store.add(observations)
            for obs, outcome in zip(observations, outcomes, strict=True):
                if obs.key.intent == ALL_INTENTS:
                    self.metrics.embeddings.labels(obs.key.tenant, obs.key.signal, outcome).inc()
            self._report_changes(changes)
        if self.sessions is not None:
            session_queries = [
                SessionQuery(q.event, q.body, v, self._encoder_name, q.app_vector)
                for q, v in zip(queries, encoded, strict=True)
                if q.in_session
            ]
            self.sessions.observe(session_queries, feedback)
        return rejections + rejected

    def tick(self, now: float) -> None:
        """Run due tests. A Redis outage is counted in tick_errors (the drift dashboard's panel) and
        raised: the runtime's outage policy retries it with backoff, the worker not ready meanwhile."""
        try:
            self.scheduler.tick(now)
            if self.sessions is not None:
                self.sessions.tick(now)
        except redis.exceptions.RedisError as exc:
            self.metrics.tick_errors.labels(type(exc).__name__).inc()
            raise

    def close(self) -> None:
        """Nothing to flush: windows and results live in Redis, the client belongs to the runtime."""

    def _app_observations(self, queries: list[_Query]) -> list[Observation]:
        if not self.config.app_embeddings.enabled:
            return []
        out = []
        for q in queries:
            vector, model = q.app_vector, q.body.query.embedding_model
            if vector is None or model is None:
                continue
            if self.labels(model) is None:  # not configured: no windows, so no series of its own
                self.metrics.embeddings.labels(q.event.tenant, APP, "unknown_model").inc()
                continue
            if not comparable(vector):  # inf as float32, or a norm no kernel can take: never windowed
                self.metrics.embeddings.labels(q.event.tenant, APP, "not_finite").inc()
                continue
            for intent in q.intents:
                key = SignalKey(q.event.tenant, APP, intent, model, len(vector))
                out.append(Observation(key, q.event.id, q.received_at, vector))
        return out

    def _encode(self, queries: list[_Query]) -> list[np.ndarray | None]:
        """The pinned encoder's vector of each query (None everywhere without the encoder)."""
        if self.encoder is None or not queries:
            return [None] * len(queries)
        model = self.encoder.get()
        if model is None:  # an outage: the runtime retries the batch; readiness() says why
            raise EncoderUnavailable(self.encoder.error or "pinned encoder not loaded")
        started = time.perf_counter()
        vectors = model.encode([q.body.query.text for q in queries])
        self.metrics.encoder_duration.observe(time.perf_counter() - started)
        self._encoder_name, self._encoder_dim = model.name, model.dim
        return list(vectors)

    def _encoder_observations(self, windowed: list[tuple[_Query, np.ndarray | None]]) -> list[Observation]:
        out = []
        for q, vector in windowed:
            if vector is None:
                continue
            for intent in q.intents:
                key = SignalKey(q.event.tenant, ENCODER, intent, self._encoder_name, self._encoder_dim)
                out.append(Observation(key, q.event.id, q.received_at, vector))
        return out

    def _report_changes(self, changes: list[ModelChange]) -> None:
        for change in changes:
            new, old = change.key, change.previous
            self.metrics.model_resets.labels(
                new.tenant,
                new.signal,
                new.intent,
                self.labels(old.model) or OTHER,
                self.labels(new.model) or OTHER,
            ).inc()
            log.warning(
                "drift: %s switched from %s (dim %d) to %s (dim %d): new reference, no comparison across models",
                new.stream,
                old.model,
                old.dim,
                new.model,
                new.dim,
            )
