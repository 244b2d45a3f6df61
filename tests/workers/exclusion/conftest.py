"""Fixtures of the exclusion worker's processor tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from workers.exclusion.config import ExclusionConfig
from workers.exclusion.metrics import ExclusionMetrics
from workers.exclusion.processor import ExclusionProcessor


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def config() -> ExclusionConfig:
    # As the config file would give it (`exclusion:` section); "locale" is always a field label.
    return ExclusionConfig.model_validate(
        {
            "proxy_score_threshold": 0.8,
            "proxy_top_k": 2,
            "intents": ["billing"],
            "predicate_fields": ["locale"],
            "max_extra_predicate_fields": 1,
        }
    )


@pytest.fixture
def make_processor(
    redis_client: redis.Redis, registry: CollectorRegistry, config: ExclusionConfig
) -> Callable[..., ExclusionProcessor]:
    """A processor on the test's Redis; the first one counts into the `registry` fixture,
    a second worker process gets a registry of its own."""

    def build(client: Any = None, own_registry: CollectorRegistry | None = None) -> ExclusionProcessor:
        metrics = ExclusionMetrics(own_registry or registry, config)
        return ExclusionProcessor(client or redis_client, metrics, config)

    return build
