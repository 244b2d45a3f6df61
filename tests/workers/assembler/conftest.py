"""Fixtures shared by the assembler tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.service.api.api_harness import RunningApi, api_settings


@pytest.fixture
def api(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, redis_client: redis.Redis
) -> Iterator[RunningApi]:
    """The real API in this process, writing to the test's topics: what an instrumented app exports to."""
    running = RunningApi(api_settings(kafka_bootstrap, redis_url, topic_prefix)).start()
    yield running
    running.stop()
