"""Outages under the review page.

- Kafka down while a reviewer saves: the label is kept in PostgreSQL and reaches Kafka once it is back.
- PostgreSQL down: every page answers 503 with Retry-After within the pool's wait (not a 500 after 30 s),
  and the same API process serves the pages and saves labels again once PostgreSQL is back.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson
import pytest
import redis

from service.api.settings import ApiSettings
from service.contracts import reviewdb
from service.local.embedded import ChildProcess, start_broker
from service.local.postgres import start_postgres
from service.review.store import CONNECTION_WAIT_S, RECONNECT_GIVE_UP_S
from tests.conftest import LOG_DIR
from tests.service.api.api_harness import KafkaReader, RunningApi
from tests.service.review.review_harness import (
    ANN_KEY,
    csrf_of,
    item_ids,
    review_settings,
    seed_queue,
    signed_in,
)
from tests.support.postgres import fresh_database


@pytest.fixture
def own_broker() -> Iterator[list[ChildProcess]]:
    brokers = [start_broker(log_dir=LOG_DIR)]
    yield brokers
    for broker in brokers:
        broker.stop()


@contextmanager
def leased_item(
    settings: ApiSettings, redis_client: redis.Redis
) -> Iterator[tuple[RunningApi, httpx.Client, int, str]]:
    """One queued item leased to ann on a started API: the API, ann's browser, the item and its page."""
    assert settings.database_url is not None
    seed_queue(settings.database_url, redis_client, [1])
    (item,) = item_ids(settings.database_url)
    api = RunningApi(settings).start()
    try:
        with signed_in(api.url, ANN_KEY) as ann:
            assert ann.get("/review/next").headers["location"] == f"/review/items/{item}"  # leased to ann
            yield api, ann, item, ann.get(f"/review/items/{item}").text
    finally:
        api.stop()


def _outbox(url: str) -> list[tuple[object, ...]]:
    with reviewdb.connect(url) as conn:
        return conn.execute("SELECT event_id, sent_at IS NOT NULL, attempts FROM label_outbox").fetchall()


@pytest.mark.slow
def test_label_saved_while_kafka_is_down_is_relayed_after(
    own_broker: list[ChildProcess],
    redis_url: str,
    topic_prefix: str,
    review_db_url: str,
    redis_client: redis.Redis,
) -> None:
    first = own_broker[0]
    bootstrap = f"127.0.0.1:{first.port}"
    settings = review_settings(bootstrap, redis_url, topic_prefix, review_db_url, produce_timeout_s=3)
    with leased_item(settings, redis_client) as (api, ann, item, page):
        first.kill()
        saved = ann.post(
            f"/review/items/{item}/label",
            data={"csrf_token": csrf_of(page), "faithful": "no", "action": "save"},
        )
        assert saved.status_code == 303  # durable in PostgreSQL: the reviewer's work is not lost
        time.sleep(3)
        ((event_id, sent, _),) = _outbox(review_db_url)
        assert sent is False
        assert api.metric("ragmon_api_label_outbox_pending_events") == 1
        own_broker.append(start_broker(port=first.port, log_dir=LOG_DIR))
        deadline = time.monotonic() + 45
        while not _outbox(review_db_url)[0][1]:
            assert time.monotonic() < deadline, "the outbox row was never relayed"
            time.sleep(0.5)
        values = [orjson.loads(r.value) for r in KafkaReader(bootstrap).records(api.topics.labels)]
        assert [v["id"] for v in values] == [str(event_id)]
        assert values[0]["body"]["faithful"] is False
        assert api.metric("ragmon_api_label_outbox_relayed_total") == 1


@pytest.fixture
def own_postgres() -> Iterator[tuple[Path, list[ChildProcess]]]:
    """A private PostgreSQL this test may stop and start again on the same cluster (not the session's).

    Its directory is not under tmp_path, for the reason tests/conftest.py gives for the session's."""
    workdir = Path(tempfile.mkdtemp(prefix="ragmon-pg-down-"))
    servers: list[ChildProcess] = [start_postgres(workdir, log_dir=LOG_DIR, durable=False)]
    try:
        yield workdir, servers
    finally:
        for server in servers:
            server.stop()  # by PID
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.slow
def test_postgres_down_answers_503_with_retry_after_and_the_pages_recover_without_restart(
    own_postgres: tuple[Path, list[ChildProcess]],
    kafka_bootstrap: str,
    redis_url: str,
    topic_prefix: str,
    redis_client: redis.Redis,
) -> None:
    workdir, servers = own_postgres
    first = servers[0]
    with fresh_database(first.extra["url"]) as url:
        settings = review_settings(kafka_bootstrap, redis_url, topic_prefix, url, retry_after_s=3)
        with leased_item(settings, redis_client) as (api, ann, item, page):
            first.stop()
            for path in ("/review", f"/review/items/{item}", "/review/calibration"):
                started = time.monotonic()
                down = ann.get(path)
                assert down.status_code == 503, (path, down.status_code, down.text[:300])
                assert down.headers["Retry-After"] == "3"
                assert "review store (PostgreSQL) is unreachable" in down.text
                assert time.monotonic() - started < CONNECTION_WAIT_S + 3, path
            form = {"csrf_token": csrf_of(page), "faithful": "no", "action": "save"}
            refused = ann.post(f"/review/items/{item}/label", data=form)
            assert refused.status_code == 503 and refused.headers["Retry-After"] == "3"
            # Ingestion does not depend on the review store.
            assert api.http.get("/readyz").status_code == 200

            time.sleep(RECONNECT_GIVE_UP_S)  # long enough for the pool's reconnection backoff to grow

            servers.append(start_postgres(workdir, port=first.port, log_dir=LOG_DIR, durable=False))
            back = time.monotonic()
            while (status := ann.get("/review").status_code) != 200:
                assert status == 503, status
                assert time.monotonic() - back < RECONNECT_GIVE_UP_S + CONNECTION_WAIT_S, "no recovery"
            page = ann.get(f"/review/items/{item}").text
            saved = ann.post(f"/review/items/{item}/label", data={**form, "csrf_token": csrf_of(page)})
            assert saved.status_code == 303, saved.text[:300]
            ((_, _, _),) = _outbox(url)  # the label saved after recovery, once
