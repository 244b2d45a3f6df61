"""Liveness and readiness (the Prometheus endpoint has its own port: service/api/metrics.py)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError

from service.api.state import ApiState, ApiStateDep

router = APIRouter()


@router.get("/healthz", summary="Liveness: the process serves requests")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Readiness: the broker and Redis are reachable",
    responses={503: {"description": "broker or Redis unreachable"}},
)
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
