"""What the review page needs in an API process: the store's pool, the label relay, sessions, templates."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from psycopg_pool import ConnectionPool

from service.api.auth import KeyStore
from service.api.metrics import ApiMetrics
from service.api.outbox import LabelRelay
from service.api.producer import EventProducer
from service.api.redaction import Redactor
from service.api.review_auth import SessionSigner
from service.api.settings import ApiSettings
from service.contracts import reviewdb
from service.review.reports import proxy_threshold_from_config
from service.review.store import ReviewStore, open_pool

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"


@dataclass
class ReviewService:
    settings: ApiSettings
    signer: SessionSigner
    templates: jinja2.Environment
    redactor: Redactor | None
    metrics: ApiMetrics
    producer: EventProducer
    pool: ConnectionPool | None = None
    store: ReviewStore | None = None
    relay: LabelRelay | None = None
    proxy_threshold: float | None = None
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    async def start(self) -> None:
        url = self.settings.database_url
        assert url is not None
        self.pool = await asyncio.to_thread(open_pool, url)
        with self.pool.connection() as conn:
            await asyncio.to_thread(reviewdb.migrate, conn)
        self.store = ReviewStore(self.pool, self.settings.review_lease_s)
        self.relay = LabelRelay(self.pool, self.producer, self.settings.topics, self.metrics,
                                produce_timeout_s=self.settings.produce_timeout_s)
        self.proxy_threshold = proxy_threshold_from_config()
        self._task = asyncio.create_task(self.relay.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if self.relay is not None:  # a last attempt, so a clean stop leaves nothing behind
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.relay.relay_once(), 5)
        if self.pool is not None:
            await asyncio.to_thread(self.pool.close)


def build_review(settings: ApiSettings, keys: KeyStore, metrics: ApiMetrics, producer: EventProducer,
                 redactor: Redactor | None) -> ReviewService | None:
    if not settings.database_url:
        return None
    secret = settings.review_secret.encode() if settings.review_secret else keys.secret()
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    return ReviewService(settings, SessionSigner(secret, settings.review_session_s), env, redactor, metrics,
                         producer)
