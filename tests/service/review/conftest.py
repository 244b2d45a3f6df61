"""A running API with the review page, on the session's broker and Redis and a fresh review database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.service.api.api_harness import RunningApi
from tests.service.review.review_harness import review_settings


@pytest.fixture
def review_api(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, review_db_url: str, redis_client: object
) -> Iterator[RunningApi]:
    api = RunningApi(review_settings(kafka_bootstrap, redis_url, topic_prefix, review_db_url)).start()
    try:
        yield api
    finally:
        api.stop()
