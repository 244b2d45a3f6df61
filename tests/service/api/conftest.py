"""Fixtures of the ingestion API tests: the real API against the session's real broker and Redis."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from tests.service.api.api_harness import KafkaReader, RunningApi, api_settings


@pytest.fixture
def start_api(kafka_bootstrap: str, redis_url: str, topic_prefix: str) -> Iterator[Callable[..., RunningApi]]:
    """Start an API on the session broker and Redis (keywords override ApiSettings fields); stopped at the end."""
    running: list[RunningApi] = []

    def start(**overrides: Any) -> RunningApi:
        api = RunningApi(api_settings(kafka_bootstrap, redis_url, topic_prefix, **overrides))
        running.append(api)
        return api.start()

    yield start
    for api in running:
        api.stop()


@pytest.fixture
def api(start_api: Callable[..., RunningApi], redis_client: redis.Redis) -> RunningApi:
    """The API with the default test keys (redis_client flushes the rate-limit buckets first)."""
    return start_api()


@pytest.fixture(scope="module")
def module_api(kafka_bootstrap: str, redis_url: str) -> Iterator[RunningApi]:
    """One API for a whole module of tests that must produce nothing (its topics stay empty)."""
    running = RunningApi(api_settings(kafka_bootstrap, redis_url, f"m{uuid.uuid4().hex[:10]}")).start()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def kafka(kafka_bootstrap: str) -> KafkaReader:
    """Reads the session broker's topics."""
    return KafkaReader(kafka_bootstrap)
