"""What the review page needs in an API process: the store's pool, the label relay, sessions, templates.

Sessions are signed cookies (service/api/review_auth.py); what a signature cannot say lives in Redis,
shared by every API process: the ids of sessions signed out (kept until the cookie would have expired)
and the failed sign-ins per client address (the login throttle).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import redis.asyncio as aioredis
from psycopg_pool import ConnectionPool
from redis.exceptions import RedisError

from service.api.auth import KeyStore
from service.api.metrics import ApiMetrics
from service.api.outbox import LabelRelay
from service.api.producer import EventProducer
from service.api.redaction import Redactor
from service.api.review_auth import Reviewer, SessionSigner, check_secret, reviewer_name
from service.api.settings import ApiSettings
from service.contracts import reviewdb
from service.review.reports import proxy_threshold_from_config
from service.review.store import ReviewStore, open_pool

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"
# Failed sign-ins one client address may make per window before it gets 429 until the window ends.
LOGIN_FAILURES_ALLOWED = 10
LOGIN_WINDOW_S = 300


class SessionStoreDown(Exception):
    """Redis did not answer: a session cannot be checked against revocations, so it is not accepted."""


class LoginThrottled(Exception):
    def __init__(self, retry_after_s: int) -> None:
        super().__init__(retry_after_s)
        self.retry_after_s = retry_after_s


def _revoked_key(reviewer: Reviewer) -> str:
    return f"ragmon:review:{reviewer.tenant}:revoked:{reviewer.session_id}"


def _login_key(address: str) -> str:
    return f"ragmon:review:login-failures:{address}"


@dataclass
class ReviewService:
    settings: ApiSettings
    signer: SessionSigner
    templates: jinja2.Environment
    redactor: Redactor | None
    metrics: ApiMetrics
    producer: EventProducer
    redis: aioredis.Redis
    keys: KeyStore
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
        self.relay = LabelRelay(
            self.pool,
            self.producer,
            self.settings.topics,
            self.metrics,
            produce_timeout_s=self.settings.produce_timeout_s,
        )
        self.proxy_threshold = proxy_threshold_from_config()
        self._task = asyncio.create_task(self.relay.run())

    def key_still_valid(self, reviewer: Reviewer) -> bool:
        """The key that opened this session is still configured, for this tenant and name, with `review`."""
        entry = self.keys.entry_by_id(reviewer.key_id)
        return (
            entry is not None
            and entry.tenant == reviewer.tenant
            and "review" in entry.scopes
            and reviewer_name(self.keys.name_of(entry)) == reviewer.name
        )

    async def revoked(self, reviewer: Reviewer) -> bool:
        try:
            return bool(await self.redis.exists(_revoked_key(reviewer)))
        except (RedisError, OSError) as exc:
            raise SessionStoreDown() from exc

    async def revoke(self, reviewer: Reviewer, now: float) -> None:
        ttl = max(1, int(reviewer.expires - now) + 1)
        try:
            await self.redis.set(_revoked_key(reviewer), b"1", ex=ttl)
        except (RedisError, OSError) as exc:
            raise SessionStoreDown() from exc

    async def check_login_allowed(self, address: str) -> None:
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.get(_login_key(address))
            pipe.ttl(_login_key(address))
            failures, ttl = await pipe.execute()
        except (RedisError, OSError) as exc:
            raise SessionStoreDown() from exc
        if failures is not None and int(failures) >= LOGIN_FAILURES_ALLOWED:
            raise LoginThrottled(max(1, int(ttl)))

    async def login_failed(self, address: str) -> None:
        key = _login_key(address)
        try:
            # NX: the window starts at the first failure and is not pushed back by later ones.
            pipe = self.redis.pipeline(transaction=True)
            pipe.incr(key)
            pipe.expire(key, LOGIN_WINDOW_S, nx=True)
            await pipe.execute()
        except (RedisError, OSError) as exc:
            raise SessionStoreDown() from exc

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


def review_secret(settings: ApiSettings) -> bytes | None:
    """None when the review page is off; the secret when it is on; ReviewSecretMissing when it cannot be."""
    if not settings.database_url:
        return None
    return check_secret(settings.review_secret)


def build_review(
    settings: ApiSettings,
    keys: KeyStore,
    metrics: ApiMetrics,
    producer: EventProducer,
    redactor: Redactor | None,
    client: aioredis.Redis,
) -> ReviewService | None:
    secret = review_secret(settings)
    if secret is None:
        return None
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined
    )
    return ReviewService(
        settings,
        SessionSigner(secret, settings.review_session_s),
        env,
        redactor,
        metrics,
        producer,
        client,
        keys,
    )
