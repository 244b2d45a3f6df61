"""Fixtures of the drift worker's tests (helpers live in drift_support.py)."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from tests.workers.drift.drift_support import TOPICS, topic_queries
from workers.drift.encoder import PinnedEncoder


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture(scope="session")
def pinned_encoder() -> PinnedEncoder:
    """Loaded once per session (about 8 s on two cores): the real wheel, hub switched off."""
    return PinnedEncoder(batch_size=64)


@pytest.fixture(scope="session")
def topic_embeddings(pinned_encoder: PinnedEncoder) -> dict[str, np.ndarray]:
    return {t: pinned_encoder.encode(topic_queries(t)) for t in TOPICS}
