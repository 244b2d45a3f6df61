"""The broker dies under the API and comes back: 503 while it is gone, ingestion resumes without a restart.

The test owns its broker (the session's is shared and must stay up): it starts
one, kills it by PID, and starts a new one on the same port. Tansu here is
memory-only, so what was produced before the crash is gone with it; the test
only requires that everything reported accepted after recovery is in Kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from service.local.embedded import ChildProcess, start_broker
from tests.conftest import LOG_DIR
from tests.service.api.api_events import feedback_event, trace_event
from tests.service.api.api_harness import KafkaReader, RunningApi

RECOVERY_DEADLINE_S = 30


@pytest.fixture
def own_broker() -> Iterator[list[ChildProcess]]:
    """Brokers this test starts; every one still alive is stopped by PID at the end."""
    brokers = [start_broker(log_dir=LOG_DIR)]
    yield brokers
    for broker in brokers:
        broker.kill()  # by PID; kill() cannot raise on a slow shutdown, so each one is reached


def poll(
    request: Callable[[], httpx.Response], until: Callable[[httpx.Response], bool], deadline_s: float
) -> list[httpx.Response]:
    """Repeat `request` until `until` holds for its response; every response seen, the last one satisfying."""
    seen: list[httpx.Response] = []
    deadline = time.monotonic() + deadline_s
    while True:
        seen.append(request())
        if until(seen[-1]):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no answer satisfied the condition within {deadline_s}s; last: "
                f"{seen[-1].status_code} {seen[-1].text}"
            )
        time.sleep(0.1)


def test_broker_down_answers_503_then_ingestion_resumes_without_restart(
    own_broker: list[ChildProcess], start_api: Callable[..., RunningApi]
) -> None:
    first = own_broker[0]
    bootstrap = f"127.0.0.1:{first.port}"
    api = start_api(kafka_bootstrap_servers=bootstrap, produce_timeout_s=3, retry_after_s=2)
    kafka = KafkaReader(bootstrap)
    before = trace_event()
    assert api.post([before]).status_code == 202
    assert [v["id"] for v in kafka.values(api.topics.traces)] == [before["id"]]

    first.kill()  # SIGKILL by PID: no goodbye to the clients
    assert not first.alive()

    sent_while_down: list[str] = []

    def post_while_down() -> httpx.Response:
        ev = trace_event()
        sent_while_down.append(ev["id"])
        return api.post([ev, feedback_event()])

    down = poll(post_while_down, lambda r: r.status_code == 503, deadline_s=15)
    # Never a 2xx for an event that is not durably in Kafka: a request in flight when the broker
    # died may be refused, but none may be reported accepted.
    assert all(r.status_code == 503 for r in down), [r.status_code for r in down]
    for r in down:
        assert r.headers["Retry-After"] == "2"
        assert r.json()["rule"] == "broker_ack"
        assert "accepted" not in r.json()
        assert "retry" in r.json()["error"]
    more = poll(post_while_down, lambda r: True, deadline_s=1)
    assert more[0].status_code == 503 and more[0].headers["Retry-After"] == "2"
    ready = api.http.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["ready"] is False and ready.json()["checks"]["broker"].startswith("down: ")
    assert ready.json()["checks"]["redis"] == "ok"
    assert api.metric("ragmon_api_shed_total", {"reason": "broker_down"}) >= 2
    assert api.metric("ragmon_api_events_accepted_total", {"tenant": "acme", "type": "trace"}) == 1
    scrape = api.scrape()
    assert "ragmon_api_broker_up 0.0" in scrape

    # The same port, a new (empty) broker; the API process is the same one.
    own_broker.append(start_broker(port=first.port, log_dir=LOG_DIR))
    accepted_after: list[str] = []

    def post_after_restart() -> httpx.Response:
        ev = trace_event()
        r = api.post([ev])
        if r.status_code == 202:
            accepted_after.append(ev["id"])
        return r

    recovering = poll(post_after_restart, lambda r: r.status_code == 202, deadline_s=RECOVERY_DEADLINE_S)
    assert all(r.status_code in (202, 503) for r in recovering), [r.status_code for r in recovering]
    for _ in range(3):
        r = post_after_restart()
        assert r.status_code == 202, r.text
    assert api.http.get("/readyz").json() == {"ready": True, "checks": {"broker": "ok", "redis": "ok"}}

    in_kafka = {v["id"] for v in kafka.values(api.topics.traces)}
    assert len(accepted_after) == 4
    assert set(accepted_after) <= in_kafka
    # The restarted broker is memory-only: the record from before the crash is gone, as expected.
    assert before["id"] not in in_kafka
    # The topics were re-created with the configured partitions, not auto-created with one.
    assert len(kafka.partitions(api.topics.traces)) == api.settings.kafka_partitions
