"""create_app(settings): the ingestion API."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import prometheus_client
import redis.asyncio as aioredis
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api import routes_events, routes_health, routes_otlp, routes_review
from service.api.auth import KeyStore
from service.api.ingest import BatchPreparer
from service.api.metrics import ApiMetrics, MetricsServer, in_multiprocess_child, serve_metrics
from service.api.otlp import SpanPreparer
from service.api.producer import EventProducer, supervise
from service.api.ratelimit import RateLimiter
from service.api.redaction import Pseudonymizer, Redactor
from service.api.review_state import build_review, review_secret
from service.api.schemas import batch_schema_components
from service.api.settings import ApiSettings
from service.api.state import STATE_KEY, ApiState
from service.api.telemetry import setup_tracing
from service.contracts.process import tune_gc

log = logging.getLogger(__name__)


class RequestMetricsMiddleware:
    """Counts requests by route template (never the raw path) and status."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]
        started = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "GET")
            self.metrics.requests.labels(template, method, str(status[0])).inc()
            self.metrics.request_seconds.labels(template, method).observe(time.perf_counter() - started)


def _require_keys(settings: ApiSettings) -> KeyStore:
    entries = settings.key_entries()
    if not entries:
        raise RuntimeError(
            "no API keys configured: set RAGMON_API_KEYS (JSON list of {tenant, key_sha256}), "
            "RAGMON_API_KEYS_FILE, or RAGMON_DEV_API_KEY for local use; `ragmon keys --tenant T [--key KEY]` prints an entry"
        )
    return KeyStore(entries)


def build_state(
    settings: ApiSettings, keys: KeyStore, metrics: ApiMetrics, client: aioredis.Redis
) -> ApiState:
    key = settings.pseudonym_key.get_secret_value().encode() if settings.pseudonym_key else None
    if key is None:
        log.warning(
            "RAGMON_PSEUDONYM_KEY is not set: this process hashes session and user ids with a random key "
            "of its own, so their pseudonyms differ between API processes and restarts"
        )
    pseudonyms = Pseudonymizer(key)
    redactor = Redactor(settings.redaction.kinds, pseudonyms) if settings.redaction.enabled else None
    state = ApiState(
        settings=settings,
        keys=keys,
        metrics=metrics,
        producer=EventProducer(
            settings,
            compression=settings.kafka_compression,
            idempotence=settings.kafka_idempotence,
            delivery_timeout_s=max(1.0, settings.produce_timeout_s - 1),
        ),
        redis=client,
        limiter=RateLimiter(client),
        preparer=BatchPreparer(
            settings.topics,
            redactor,
            settings.max_event_age_s,
            settings.max_clock_skew_s,
            settings.max_events_per_batch,
        ),
        span_preparer=SpanPreparer(settings.topics, redactor, settings.otlp_max_attribute_chars, pseudonyms),
    )
    state.review = build_review(settings, state.keys, metrics, state.producer, redactor, client)
    return state


def create_app(settings: ApiSettings | None = None, registry: CollectorRegistry | None = None) -> FastAPI:
    settings = settings or ApiSettings()
    prometheus_client.disable_created_metrics()  # also in processes uvicorn spawns for --workers
    setup_tracing("ragmon-api")
    keys = _require_keys(settings)  # fails at start, before any port is bound
    review_secret(
        settings
    )  # likewise: the review page is on (a database) but nothing would sign its sessions
    metrics = ApiMetrics(registry or CollectorRegistry())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, ApiState]]:
        # Created here, in the event loop that serves requests, and closed with it.
        client = aioredis.Redis.from_url(settings.redis_url, socket_timeout=2, socket_connect_timeout=2)
        state = build_state(settings, keys, metrics, client)
        scrape: MetricsServer | None = None
        if not in_multiprocess_child():  # with --workers N the parent serves every child's metrics
            scrape = serve_metrics(settings.api_metrics_host, settings.api_metrics_port, metrics.registry)
            app.state.metrics_port = scrape.port
        await asyncio.to_thread(state.producer.start)
        supervisor = asyncio.create_task(
            supervise(state.producer, report=lambda up: metrics.broker_up.set(1 if up else 0))
        )
        if state.review is not None:
            await state.review.start()
        tune_gc()
        try:
            yield {STATE_KEY: state}  # handlers get it through service.api.state.ApiStateDep
        finally:
            if state.review is not None:
                await state.review.stop()
            supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await supervisor
            await asyncio.to_thread(state.producer.close)
            await client.aclose()
            if scrape is not None:
                await asyncio.to_thread(scrape.close)

    # No Swagger UI or ReDoc: FastAPI's pages load their script from a CDN, which would run third-party
    # code on the API's origin. The schema stays at /openapi.json for any local viewer.
    app = FastAPI(title="ragmon ingestion API", version="1", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.include_router(routes_events.router)
    app.include_router(routes_otlp.router)
    app.include_router(routes_health.router)
    app.include_router(routes_review.router)
    app.add_middleware(RequestMetricsMiddleware, metrics=metrics)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            _, defs = batch_schema_components()
            schema.setdefault("components", {}).setdefault("schemas", {}).update(defs)
            schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            # Only ingestion takes a key: /healthz and /readyz are open to probes (/metrics has its own port).
            schema["paths"]["/v1/events"]["post"]["security"] = [{"bearer": []}]
            schema["paths"]["/v1/traces"]["post"]["security"] = [{"bearer": []}]
            schema["paths"]["/v1/logs"]["post"]["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
