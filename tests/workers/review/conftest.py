"""The review sampler built against the tests' real Redis and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from workers.review.config import ReviewConfig
from workers.review.metrics import ReviewMetrics
from workers.review.processor import ReviewProcessor
from workers.review.store import QueueStore


@pytest.fixture
def make(review_db_url: str, redis_client: redis.Redis) -> Iterator[Any]:
    made: list[ReviewProcessor] = []

    def build(**config: Any) -> tuple[ReviewProcessor, CollectorRegistry]:
        cfg = ReviewConfig(**{"blind_rate": 1e-9, **config})
        store = QueueStore(review_db_url, cfg, "config-test")
        store.migrate()
        registry = CollectorRegistry()
        proc = ReviewProcessor(cfg, ReviewMetrics(registry), redis_client, store)
        made.append(proc)
        return proc, registry

    yield build
    for proc in made:
        proc.close()
