"""Liveness, readiness and the Prometheus endpoint."""

from __future__ import annotations

import asyncio
import os

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from redis.exceptions import RedisError

from service.api.state import ApiState, ApiStateDep

router = APIRouter()


@router.get("/healthz", summary="Liveness: the process serves requests")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: the broker and Redis are reachable",
            responses={503: {"description": "broker or Redis unreachable"}})
async def readyz(state: ApiStateDep) -> JSONResponse:
    redis_ok = await redis_ping(state)
    checks = {
        "broker": "ok" if state.producer.up else f"down: {state.producer.last_error}",
        "redis": "ok" if redis_ok else "down",
    }
    ready = state.producer.up and redis_ok
    return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)


async def redis_ping(state: ApiState) -> bool:
    try:
        ok = bool(await asyncio.wait_for(state.redis.ping(), 1.0))
    except (RedisError, OSError, TimeoutError):
        ok = False
    state.metrics.redis_up.set(1 if ok else 0)
    return ok


@router.get("/metrics", summary="Prometheus metrics of the API", response_class=PlainTextResponse)
async def metrics(state: ApiStateDep) -> Response:
    state.metrics.broker_up.set(1 if state.producer.up else 0)
    return Response(generate_latest(exposition_registry(state)), media_type=CONTENT_TYPE_LATEST)


def exposition_registry(state: ApiState) -> CollectorRegistry:
    """This process's registry, or every API process' metrics when several share the port."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return state.metrics.registry
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry
