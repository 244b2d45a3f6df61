"""What one API process holds (settings, keys, the limiter, the producer, metrics) and how handlers get it.

The lifespan builds the state and yields it as lifespan state; Starlette hands
that to every request as `request.state`, and handlers declare `ApiStateDep`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import redis.asyncio as aioredis
from fastapi import Depends, Request

from service.api.auth import KeyStore
from service.api.ingest import BatchPreparer
from service.api.metrics import ApiMetrics
from service.api.otlp import SpanPreparer
from service.api.producer import EventProducer
from service.api.ratelimit import RateLimiter
from service.api.settings import ApiSettings

if TYPE_CHECKING:
    from service.api.review_state import ReviewService


@dataclass
class ApiState:
    settings: ApiSettings
    keys: KeyStore
    metrics: ApiMetrics
    producer: EventProducer
    redis: aioredis.Redis
    limiter: RateLimiter
    preparer: BatchPreparer
    span_preparer: SpanPreparer
    inflight_events: int = 0
    review: ReviewService | None = None  # the review page; None without RAGMON_DATABASE_URL
    # Per tenant (tenants come from the configured keys): its bodies in worker threads at once,
    # and the bytes of the bodies its requests hold (BodyHold).
    _thread_slots: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    body_bytes: dict[str, int] = field(default_factory=dict)

    def thread_slots(self, tenant: str) -> asyncio.Semaphore:
        """The tenant's share of the worker threads that decode big bodies (`threads_per_tenant`):
        one tenant's slow bodies wait for its own slots, never in front of another tenant's."""
        slots = self._thread_slots.get(tenant)
        if slots is None:
            slots = self._thread_slots[tenant] = asyncio.Semaphore(self.settings.threads_per_tenant)
        return slots


@dataclass
class BodyHold:
    """The body bytes one request holds of its tenant's share, `body_bytes_per_tenant` (at least one
    largest body): a tenant's thousand concurrent uploads are refused as they pass its share instead
    of being held in memory before any rate limit could count them. Released when the request ends."""

    state: ApiState
    tenant: str = ""
    held: int = 0

    def take(self, tenant: str, size: int) -> bool:
        settings = self.state.settings
        share = max(settings.body_bytes_per_tenant, settings.max_body_bytes)
        now = self.state.body_bytes.get(tenant, 0)
        if now + size > share:
            return False
        self.state.body_bytes[tenant] = now + size
        self.tenant, self.held = tenant, self.held + size
        return True

    def release(self) -> None:
        if self.held:
            left = self.state.body_bytes[self.tenant] - self.held
            if left:
                self.state.body_bytes[self.tenant] = left
            else:
                del self.state.body_bytes[self.tenant]
            self.held = 0


STATE_KEY = "ragmon"


async def _api_state(request: Request) -> ApiState:
    # async: FastAPI runs a plain `def` dependency in its thread pool, a thread hand-off (and a
    # GIL hand-back) on every request for what is one attribute lookup.
    state: ApiState = getattr(request.state, STATE_KEY)
    return state


ApiStateDep = Annotated[ApiState, Depends(_api_state)]
