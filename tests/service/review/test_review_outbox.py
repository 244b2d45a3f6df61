"""Kafka down while a reviewer saves: the label is kept in PostgreSQL and reaches Kafka once it is back."""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest
import redis

from service.contracts import reviewdb
from service.local.embedded import ChildProcess, start_broker
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


@pytest.fixture
def own_broker() -> Iterator[list[ChildProcess]]:
    brokers = [start_broker(log_dir=LOG_DIR)]
    yield brokers
    for broker in brokers:
        broker.stop()


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
    seed_queue(review_db_url, redis_client, [1])
    (item,) = item_ids(review_db_url)
    api = RunningApi(
        review_settings(bootstrap, redis_url, topic_prefix, review_db_url, produce_timeout_s=3)
    ).start()
    try:
        with signed_in(api.url, ANN_KEY) as ann:
            assert ann.get("/review/next").headers["location"] == f"/review/items/{item}"  # leased to ann
            page = ann.get(f"/review/items/{item}").text
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
    finally:
        api.stop()
