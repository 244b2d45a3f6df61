"""The API with its review page on real Kafka, Redis and PostgreSQL, and a queue seeded by the real sampler."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import redis
from prometheus_client import CollectorRegistry

from service.api.settings import ApiSettings
from service.contracts import reviewdb
from service.review.store import LabelInput, ReviewStore, open_pool
from tests.service.api.api_harness import key_entry
from tests.workers.review.helpers import exclusion_event, faithfulness_event, trace_event
from workers.review.config import ReviewConfig
from workers.review.metrics import ReviewMetrics
from workers.review.processor import ReviewProcessor
from workers.review.store import QueueStore

INGEST_KEY = "rgm_test_acme_ingest_0123456789"
ANN_KEY = "rgm_test_acme_review_ann_0123456789"
BOB_KEY = "rgm_test_acme_review_bob_0123456789"
GLOBEX_REVIEW_KEY = "rgm_test_globex_review_0123456789"
REVIEW_SECRET = "test-review-secret-not-derived-from-anything-0123456789"

REVIEW_KEYS = [
    key_entry("acme", INGEST_KEY, name="acme-app"),
    key_entry("acme", ANN_KEY, scopes=["review"], name="ann"),
    key_entry("acme", BOB_KEY, scopes=["review"], name="bob"),
    key_entry("globex", GLOBEX_REVIEW_KEY, scopes=["review"], name="gus"),
]


def review_settings(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, database_url: str, **overrides: Any
) -> ApiSettings:
    fields: dict[str, Any] = {
        "kafka_bootstrap_servers": kafka_bootstrap,
        "redis_url": redis_url,
        "kafka_topic_prefix": topic_prefix,
        "kafka_partitions": 2,
        "api_keys": REVIEW_KEYS,
        "database_url": database_url,
        "review_secret": REVIEW_SECRET,
        "api_metrics_port": 0,
        **overrides,
    }
    return ApiSettings(**fields)


def seed_queue(
    database_url: str,
    client: redis.Redis,
    numbers: list[int],
    tenant: str = "acme",
    overrides: dict[int, dict[str, Any]] | None = None,
    scores: dict[int, float] | None = None,
    double_review_share: float = 0.0,
) -> None:
    """Queue traces `trace-<n>` through the real sampler (blind stratum), then score each."""
    config = ReviewConfig(blind_rate=1.0, capacity_per_day=10_000, double_review_share=double_review_share)
    store = QueueStore(database_url, config, "config-test")
    store.migrate()
    proc = ReviewProcessor(config, ReviewMetrics(CollectorRegistry()), client, store)
    overrides, scores = overrides or {}, scores or {}
    try:
        proc.process([trace_event(n, tenant=tenant, **overrides.get(n, {})) for n in numbers])
        proc.process([faithfulness_event(n, scores.get(n, 0.8), tenant=tenant) for n in numbers])
        proc.process([exclusion_event(n, False, tenant=tenant) for n in numbers])
    finally:
        proc.close()


def item_ids(database_url: str, tenant: str = "acme") -> list[int]:
    with reviewdb.connect(database_url) as conn:
        return [
            r[0] for r in conn.execute("SELECT id FROM review_item WHERE tenant = %s ORDER BY id", (tenant,))
        ]


def label_every_item(database_url: str, label: Callable[[int], LabelInput]) -> None:
    """Assign each of acme's queued items to ann and save, as ann, the label `label(n)` gives for its
    trace `trace-n`."""
    pool = open_pool(database_url, max_size=2)
    store = ReviewStore(pool)
    try:
        for item_id in item_ids(database_url):
            with pool.connection() as conn:
                row = conn.execute("SELECT trace_id FROM review_item WHERE id = %s", (item_id,)).fetchone()
                conn.execute(
                    "INSERT INTO review_assignment (item_id, reviewer, expires_at) "
                    "VALUES (%s, 'ann', now() + interval '1 hour') ON CONFLICT DO NOTHING",
                    (item_id,),
                )
            assert row is not None
            n = int(row[0].split("-")[1])
            store.save_label(item_id, "acme", "ann", label(n))
    finally:
        pool.close()


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "no CSRF token in the page"
    return found.group(1)


@contextmanager
def signed_in(base_url: str, key: str) -> Iterator[httpx.Client]:
    """A browser-like client (cookies kept) signed in with `key`."""
    with httpx.Client(base_url=base_url, timeout=20, follow_redirects=False) as client:
        page = client.get("/review")
        response = client.post("/review/login", data={"key": key, "csrf_token": csrf_of(page.text)})
        assert response.status_code == 303, response.text
        yield client
