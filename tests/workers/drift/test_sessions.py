"""Reformulations and unresolved sessions (docs/reformulations.md), against the real Redis.

Follow-ups within and outside the window, similar and dissimilar queries, embeddings
of different models never compared, the pinned encoder's vectors when the app sends
none, sessions ending after the idle time, and redelivery counted once.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime

import numpy as np
import pytest
import redis
from prometheus_client import CollectorRegistry

from service.contracts import StoredEvent
from service.contracts.scores import ImplicitSignalEvent
from tests.support.decoded import decoded_event
from tests.workers.drift.drift_support import T0, app_config, build_processor
from workers.drift.encoder import EncoderSlot, PinnedEncoder
from workers.drift.followups import reformulation_signal
from workers.drift.processor import DriftProcessor
from workers.drift.reformulation import cosine, session_outcome
from workers.drift.sessions import Query, SessionStore
from workers.drift.views import VIEWS
from workers.runtime.types import Event

_offsets = itertools.count()
BILLING = [1.0, 0.0, 0.0, 0.0]
BILLING_AGAIN = [0.98, 0.15, 0.0, 0.0]  # cosine 0.988
OTHER_TOPIC = [0.0, 1.0, 0.0, 0.0]  # cosine 0


def _event(event_type: str, body: dict[str, object], at: float, event_id: str | None = None) -> Event:
    when = datetime.fromtimestamp(at, tz=UTC)
    stored = StoredEvent(
        id=uuid.UUID(event_id) if event_id else uuid.uuid4(),
        type=event_type,
        tenant="acme",
        timestamp=when,
        received_at=when,
        body=body,
    )
    return decoded_event(stored, VIEWS, topic=f"ragmon.{event_type}s", offset=next(_offsets))


def query(
    at: float,
    embedding: list[float] | None = BILLING,
    *,
    session: str | None = "s1",
    model: str = "emb-a",
    intent: str | None = "billing",
    trace: str | None = None,
    variant: str = "production",
    event_id: str | None = None,
    text: str = "how do I pay my invoice?",
) -> Event:
    q: dict[str, object] = {"text": text}
    if embedding is not None:
        q.update(embedding=embedding, embedding_model=model)
    body: dict[str, object] = {
        "trace_id": trace or uuid.uuid4().hex,
        "request_id": uuid.uuid4().hex,
        "variant": variant,
        "query": q,
    }
    if session is not None:
        body["session_id"] = session
    if intent is not None:
        body["intent"] = intent
    return _event("trace", body, at, event_id)


def feedback(trace: str, kind: str, value: object, at: float, event_id: str | None = None) -> Event:
    return _event("feedback", {"trace_id": trace, "kind": kind, "value": value}, at, event_id)


def sessions_config(**overrides: object) -> object:
    return app_config(sessions={"window_s": 300, "min_cosine": 0.9, "idle_s": 600, **overrides})


@pytest.fixture
def proc(redis_client: redis.Redis, registry: CollectorRegistry) -> DriftProcessor:
    return build_processor(sessions_config(), redis_client, registry)  # type: ignore[arg-type]


def followups(
    registry: CollectorRegistry, outcome: str, intent: str = "billing", embedding: str = "app"
) -> float:
    got = registry.get_sample_value(
        "ragmon_feedback_followups_total",
        {"tenant": "acme", "intent": intent, "embedding": embedding, "outcome": outcome},
    )
    return got or 0.0


def session_queries(registry: CollectorRegistry, outcome: str) -> float:
    got = registry.get_sample_value(
        "ragmon_feedback_session_queries_total", {"tenant": "acme", "outcome": outcome}
    )
    return got or 0.0


def ended(registry: CollectorRegistry, outcome: str, intent: str = "billing") -> float:
    got = registry.get_sample_value(
        "ragmon_feedback_sessions_ended_total", {"tenant": "acme", "intent": intent, "outcome": outcome}
    )
    return got or 0.0


def test_a_similar_query_within_the_window_is_a_reformulation(
    proc: DriftProcessor, registry: CollectorRegistry
) -> None:
    proc.process([query(T0), query(T0 + 60, BILLING_AGAIN)])
    assert followups(registry, "reformulated") == 1
    assert followups(registry, "different") == 0
    assert session_queries(registry, "first") == 1 and session_queries(registry, "followup") == 1


def test_a_dissimilar_query_within_the_window_is_a_different_question(
    proc: DriftProcessor, registry: CollectorRegistry
) -> None:
    proc.process([query(T0)])
    proc.process([query(T0 + 60, OTHER_TOPIC)])  # across batches: the state is in Redis
    assert followups(registry, "different") == 1
    assert followups(registry, "reformulated") == 0


def test_outside_the_window_is_no_follow_up(proc: DriftProcessor, registry: CollectorRegistry) -> None:
    proc.process([query(T0), query(T0 + 301, BILLING_AGAIN)])
    assert session_queries(registry, "after_window") == 1
    assert followups(registry, "reformulated") + followups(registry, "different") == 0
    # The window runs from the latest query: the next one, 60 s on, is a follow-up again.
    proc.process([query(T0 + 361, BILLING)])
    assert followups(registry, "reformulated") == 1


def test_other_sessions_and_queries_without_a_session_are_never_paired(
    proc: DriftProcessor, registry: CollectorRegistry
) -> None:
    proc.process([query(T0, session="s1"), query(T0 + 10, session="s2"), query(T0 + 20, session=None)])
    assert session_queries(registry, "first") == 2
    assert followups(registry, "reformulated") + followups(registry, "different") == 0


def test_a_shadow_run_is_not_a_follow_up(proc: DriftProcessor, registry: CollectorRegistry) -> None:
    proc.process([query(T0), query(T0 + 1, variant="candidate-b")])
    assert session_queries(registry, "first") == 1
    assert followups(registry, "reformulated") == 0


def test_embeddings_of_different_models_are_never_compared(
    proc: DriftProcessor, registry: CollectorRegistry
) -> None:
    proc.process([query(T0, model="emb-a"), query(T0 + 60, BILLING, model="emb-b")])
    assert followups(registry, "not_compared", embedding="none") == 1
    assert followups(registry, "reformulated") == 0
    # Same model name, another dimension: not comparable either.
    proc.process([query(T0 + 120, [1.0, 0.0, 0.0], model="emb-b")])
    assert followups(registry, "not_compared", embedding="none") == 2


def test_the_count_goes_to_the_earlier_querys_intent(
    proc: DriftProcessor, registry: CollectorRegistry
) -> None:
    proc.process([query(T0, intent="account"), query(T0 + 30, BILLING_AGAIN, intent="billing")])
    assert followups(registry, "reformulated", intent="account") == 1
    assert followups(registry, "reformulated", intent="billing") == 0


def test_intents_are_capped_to_the_configured_set(proc: DriftProcessor, registry: CollectorRegistry) -> None:
    proc.process([query(T0, intent="made-up-by-a-client"), query(T0 + 30, intent=None), query(T0 + 60)])
    assert followups(registry, "reformulated", intent="other") == 1
    assert followups(registry, "reformulated", intent="none") == 1


def test_redelivery_is_counted_once(proc: DriftProcessor, registry: CollectorRegistry) -> None:
    first, second = query(T0), query(T0 + 60, BILLING_AGAIN)
    proc.process([first, second])
    proc.process([first, second])  # the whole batch again (a retry after an outage)
    proc.process([second])
    assert followups(registry, "reformulated") == 1
    assert session_queries(registry, "first") == 1
    assert session_queries(registry, "duplicate") == 2 and session_queries(registry, "late") == 1


def test_a_query_older_than_the_sessions_last_is_late_and_not_compared(
    proc: DriftProcessor, registry: CollectorRegistry
) -> None:
    proc.process([query(T0 + 100), query(T0 + 50, BILLING_AGAIN)])
    assert session_queries(registry, "late") == 1
    assert followups(registry, "reformulated") == 0


def test_without_an_app_embedding_no_comparison(proc: DriftProcessor, registry: CollectorRegistry) -> None:
    proc.process([query(T0, None), query(T0 + 30, None)])
    assert followups(registry, "not_compared", embedding="none") == 1


@pytest.mark.filterwarnings(
    "ignore::RuntimeWarning"
)  # as in production: numpy's overflow warnings are no errors
def test_an_embedding_beyond_float32_is_never_compared(
    proc: DriftProcessor, registry: CollectorRegistry
) -> None:
    """1e39 is inf as float32: its cosine was NaN, read as a different question."""
    proc.process([query(T0, [1e39, 0.0, 0.0, 0.0]), query(T0 + 30, [1e39, 1.0, 0.0, 0.0])])
    assert followups(registry, "not_compared", embedding="none") == 1
    assert followups(registry, "different") == 0


class FixedEncoder:
    """A stand-in for the pinned encoder: fixed vectors per query text (the real one is tested below)."""

    name = "fixed-encoder@1"
    dim = 4

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([BILLING if "invoice" in t else OTHER_TOPIC for t in texts], dtype=np.float32)


def test_the_pinned_encoders_vectors_are_used_when_the_app_sends_none(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    config = app_config(
        encoder={"enabled": True}, sessions={"window_s": 300, "min_cosine": 0.9, "idle_s": 600}
    )
    slot = EncoderSlot(64, "cpu")
    slot.encoder = FixedEncoder()  # type: ignore[assignment]
    proc = DriftProcessor(config, redis_client, registry, encoder=slot)
    proc.process([query(T0, None), query(T0 + 30, None)])
    assert followups(registry, "reformulated", embedding="encoder") == 1
    # An app embedding on both sides wins over the encoder's: these two differ on the app's.
    proc.process([query(T0 + 60, BILLING), query(T0 + 90, OTHER_TOPIC)])
    assert followups(registry, "different", embedding="app") == 1


def test_the_real_pinned_encoder_at_the_default_threshold(
    redis_client: redis.Redis, registry: CollectorRegistry, pinned_encoder: PinnedEncoder
) -> None:
    """Measured cosines (docs/reformulations.md): a rephrasing 0.96, another question 0.13."""
    config = app_config(encoder={"enabled": True}, sessions={"window_s": 300, "idle_s": 600})
    proc = build_processor(config, redis_client, registry, encoder=pinned_encoder)
    texts = ["how do I pay my invoice?", "how can I pay the invoice", "how do I reset my password?"]
    proc.process([query(T0 + 30 * i, None, text=t) for i, t in enumerate(texts)])
    assert followups(registry, "reformulated", embedding="encoder") == 1
    assert followups(registry, "different", embedding="encoder") == 1


def tick_ended(proc: DriftProcessor, now: float) -> None:
    proc.tick(now)


def test_a_session_ends_after_the_idle_time_once(proc: DriftProcessor, registry: CollectorRegistry) -> None:
    proc.process([query(T0)])
    tick_ended(proc, T0 + 599)
    assert ended(registry, "resolved") == 0
    tick_ended(proc, T0 + 601)
    tick_ended(proc, T0 + 700)
    assert ended(registry, "resolved") == 1
    # A query after the end starts a new session: no follow-up of the ended one.
    proc.process([query(T0 + 710, BILLING_AGAIN)])
    assert session_queries(registry, "first") == 2


def test_a_new_query_postpones_the_end(proc: DriftProcessor, registry: CollectorRegistry) -> None:
    proc.process([query(T0), query(T0 + 500, OTHER_TOPIC)])
    tick_ended(proc, T0 + 601)
    assert ended(registry, "resolved") == 0
    tick_ended(proc, T0 + 1101)
    assert ended(registry, "resolved") == 1


@pytest.mark.parametrize(
    ("marks", "outcome"),
    [
        ([("thumbs", False)], "thumbs_down"),
        ([("thumbs", -1)], "thumbs_down"),
        ([("thumbs", True)], "resolved"),
        ([("regenerate", None)], "regenerated"),
        ([("thumbs", False), ("thumbs", True)], "resolved"),  # the vote was changed to up
        ([("copy", None)], "resolved"),
    ],
)
def test_how_a_session_ends_follows_its_last_answers_feedback(
    proc: DriftProcessor, registry: CollectorRegistry, marks: list[tuple[str, object]], outcome: str
) -> None:
    last = "trace-last"
    proc.process([query(T0, trace="trace-first"), query(T0 + 30, OTHER_TOPIC, trace=last)])
    for i, (kind, value) in enumerate(marks):
        proc.process([feedback(last, kind, value, T0 + 40 + i)])
    proc.process([feedback("trace-first", "thumbs", False, T0 + 50)])  # not the last answer: no effect
    tick_ended(proc, T0 + 700)
    assert ended(registry, outcome) == 1
    total = sum(ended(registry, o) for o in ("resolved", "thumbs_down", "regenerated", "reformulated"))
    assert total == 1


def test_feedback_before_its_trace_still_counts(proc: DriftProcessor, registry: CollectorRegistry) -> None:
    proc.process([feedback("trace-x", "thumbs", False, T0)])
    proc.process([query(T0 + 1, trace="trace-x")])
    tick_ended(proc, T0 + 700)
    assert ended(registry, "thumbs_down") == 1


def test_a_session_whose_last_query_was_a_reformulation_ends_unresolved(
    proc: DriftProcessor, registry: CollectorRegistry
) -> None:
    proc.process([query(T0), query(T0 + 30, BILLING_AGAIN)])
    tick_ended(proc, T0 + 700)
    assert ended(registry, "reformulated") == 1


def test_session_state_has_a_ttl(proc: DriftProcessor, redis_client: redis.Redis) -> None:
    proc.process([query(T0, trace="t-a"), feedback("t-a", "thumbs", True, T0 + 1)])
    # every key but the sets of when sessions end (members leave them as the sessions end)
    keys = [
        k
        for k in redis_client.scan_iter("ragmon:drift:session:*")
        if b":idle:" not in k and not k.endswith(b":due")
    ]
    assert len(keys) == 2
    assert all(0 < redis_client.ttl(k) <= 2 * 600 + 300 + 60 for k in keys)


def test_session_outcome_and_cosine_by_hand() -> None:
    assert session_outcome({}, False) == "resolved"
    assert session_outcome({"down": 2.0, "up": 1.0}, False) == "thumbs_down"
    assert session_outcome({"down": 1.0, "up": 2.0, "regenerate": 3.0}, False) == "regenerated"
    assert session_outcome({}, True) == "reformulated"
    assert session_outcome({"up": 2.0}, True) == "resolved"  # the rephrasing worked
    a, b = np.array([1.0, 0.0]), np.array([1.0, 1.0])
    assert cosine(a, b) == pytest.approx(2**-0.5)
    assert cosine(a, np.zeros(2)) is None and cosine(a, np.ones(3)) is None


def test_a_reformulation_is_published_as_a_signal_of_the_earlier_trace(
    redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    published: list[ImplicitSignalEvent] = []
    proc = DriftProcessor(sessions_config(), redis_client, registry, publish=published.append)  # type: ignore[arg-type]
    first, again = query(T0, trace="t-first"), query(T0 + 60, BILLING_AGAIN, trace="t-again")
    proc.process([first, again, query(T0 + 90, OTHER_TOPIC, trace="t-other")])
    assert [(s.trace_id, s.by_trace_id, s.signal) for s in published] == [
        ("t-first", "t-again", "reformulation")
    ]
    (signal,) = published
    assert signal.source_event_id == again.stored.id and signal.tenant == "acme"
    # the id derives from the follow-up: published again (a retried batch before the swap), the same event
    assert signal.event_id == reformulation_signal(again, "t-first", "t-again").event_id
    proc.process([again])  # redelivered: a duplicate, never compared or published again
    assert len(published) == 1


def test_a_tenant_opening_thousands_of_sessions_does_not_delay_another_tenants_ends(
    redis_client: redis.Redis,
) -> None:
    store = SessionStore(redis_client, "ragmon:drift", idle_s=10, window_s=60)
    flood = [("flood", f"s{i}", Query(f"f{i}", f"ft{i}", T0, "other"), T0 - 100) for i in range(2000)]
    store.advance(flood)  # every flood session ends before the quiet tenant's
    store.advance([("quiet", f"s{i}", Query(f"q{i}", f"qt{i}", T0, "other"), T0) for i in range(3)])
    ended = list(store.iter_ended(T0 + 11, 50))
    assert sum(e.tenant == "quiet" for e in ended) == 3 and len(ended) == 50
    assert len(list(store.iter_ended(T0 + 11, 5000))) == 1953, "each ends once"
    assert redis_client.zcard("ragmon:drift:session:due") == 0
