"""What one API process holds: settings, keys, the limiter, the producer, metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis.asyncio as aioredis

from service.api.auth import KeyStore
from service.api.ingest import BatchPreparer
from service.api.metrics import ApiMetrics
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
    inflight_events: int = 0
    review: ReviewService | None = None  # the review page; None without RAGMON_DATABASE_URL
