"""The per-tenant rate limit: a token bucket of events in the real Redis, shared by every API replica."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis

from service.local.embedded import ChildProcess, start_redis
from tests.conftest import LOG_DIR
from tests.service.api.api_events import ACME_KEY, feedback_event
from tests.service.api.api_harness import DEFAULT_KEYS, KafkaReader, RunningApi, key_entry

SLOW_KEY = "rgm_test_slow_0123456789"


def slow_tenant(eps: float, burst: int) -> list:
    return [*DEFAULT_KEYS, key_entry("slowco", SLOW_KEY, rate_limit_eps=eps, burst=burst)]


def poll_until(request: Callable[[], httpx.Response], status: int, deadline_s: float) -> list[int]:
    seen: list[int] = []
    deadline = time.monotonic() + deadline_s
    while True:
        seen.append(request().status_code)
        if seen[-1] == status:
            return seen
        assert time.monotonic() < deadline, f"no {status} within {deadline_s}s: {seen}"
        time.sleep(0.1)


def test_one_tenant_over_its_rate_does_not_slow_another(
    start_api: Callable[..., RunningApi], kafka: KafkaReader, redis_client: redis.Redis
) -> None:
    api = start_api(api_keys=slow_tenant(eps=1, burst=4), max_events_per_batch=4)
    assert api.post([feedback_event() for _ in range(4)], key=SLOW_KEY).status_code == 202
    refused = [feedback_event() for _ in range(4)]
    r = api.post(refused, key=SLOW_KEY)
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    other = [feedback_event() for _ in range(4)]
    assert api.post(other, key=ACME_KEY).status_code == 202

    produced = {v["id"]: v["tenant"] for v in kafka.values(api.topics.feedback)}
    assert len(produced) == 8
    assert not {e["id"] for e in refused} & set(produced)
    assert all(produced[e["id"]] == "acme" for e in other)
    # The bucket lives in Redis with an expiry: idle tenants leave nothing behind.
    assert 0 < redis_client.pttl("ragmon:ratelimit:slowco") <= (4 / 1 * 1000) + 1000


def test_the_bucket_refills_at_the_tenants_rate(
    start_api: Callable[..., RunningApi], kafka: KafkaReader, redis_client: redis.Redis
) -> None:
    api = start_api(api_keys=slow_tenant(eps=10, burst=5), max_events_per_batch=5)
    assert api.post([feedback_event() for _ in range(5)], key=SLOW_KEY).status_code == 202
    r = api.post([feedback_event() for _ in range(5)], key=SLOW_KEY)
    assert (
        r.status_code == 429 and r.headers["Retry-After"] == "1"
    )  # 5 events at 10/s: half a second, rounded up
    accepted: list[str] = []

    def retry() -> httpx.Response:
        batch = [feedback_event() for _ in range(5)]
        answer = api.post(batch, key=SLOW_KEY)
        if answer.status_code == 202:
            accepted.extend(e["id"] for e in batch)
        return answer

    statuses = poll_until(retry, 202, deadline_s=5)
    assert set(statuses) <= {429, 202}
    produced = {v["id"] for v in kafka.values(api.topics.feedback)}
    assert len(produced) == 10 and set(accepted) <= produced


def test_a_full_batch_always_fits_the_bucket(
    start_api: Callable[..., RunningApi], kafka: KafkaReader, redis_client: redis.Redis
) -> None:
    # A burst below the batch limit would refuse a full batch forever; the API raises it to the limit.
    api = start_api(api_keys=slow_tenant(eps=1, burst=1), max_events_per_batch=6)
    assert api.post([feedback_event() for _ in range(6)], key=SLOW_KEY).status_code == 202
    assert len(kafka.records(api.topics.feedback)) == 6


@pytest.fixture
def own_redis() -> Iterator[list[ChildProcess]]:
    servers = [start_redis(log_dir=LOG_DIR)]
    yield servers
    for server in servers:
        server.kill()  # by PID; kill() cannot raise on a slow shutdown, so each one is reached


def test_losing_redis_fails_open_and_readiness_says_so(
    start_api: Callable[..., RunningApi], kafka: KafkaReader, own_redis: list[ChildProcess]
) -> None:
    first = own_redis[0]
    api = start_api(redis_url=f"redis://127.0.0.1:{first.port}/0")
    assert api.http.get("/readyz").status_code == 200
    first.kill()

    kept = feedback_event()
    r = api.post([kept])
    # The limiter is a guard, not the data path: without it events are still taken, durably.
    assert r.status_code == 202, r.text
    assert [v["id"] for v in kafka.values(api.topics.feedback)] == [kept["id"]]
    ready = api.http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"broker": "ok", "redis": "down"}
    assert api.metric("ragmon_api_redis_up") == 0

    own_redis.append(start_redis(port=first.port, log_dir=LOG_DIR))
    poll_until(lambda: api.http.get("/readyz"), 200, deadline_s=10)
    assert api.metric("ragmon_api_redis_up") == 1
