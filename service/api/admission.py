"""Admission of a request to an ingestion route (POST /v1/events, POST /v1/traces), written once:
the 401 challenge, and the tenant's rate limit (a token bucket in Redis that fails open).

Each route words its refusal in its own encoding (JSON for /v1/events, OTLP's Status for
/v1/traces) from what these return.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from redis.exceptions import RedisError

from service.api.auth import AuthError, Principal
from service.api.state import ApiState

# RFC 9110: a 401 names the scheme that would be accepted.
BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="ragmon"'}


def challenge(exc: AuthError) -> dict[str, str] | None:
    """The headers of an authentication refusal: the challenge on a 401, none on a 403."""
    return BEARER_CHALLENGE if exc.status == 401 else None


def bucket(state: ApiState, principal: Principal, least_burst: int) -> tuple[float, int]:
    """The tenant's rate and burst; the burst is at least `least_burst`, so the largest request a
    route allows (a full batch, the most spans of an export) always fits in the bucket."""
    s = state.settings
    return principal.rate_limit_eps or s.rate_limit_eps, max(
        principal.burst or s.rate_limit_burst, least_burst
    )


@dataclass(frozen=True, slots=True)
class OverRate:
    """A request refused by the tenant's rate limit (429)."""

    tenant: str
    rate: float
    burst: int
    retry_after_s: int

    def message(self, unit: str) -> str:
        return (
            f"tenant '{self.tenant}' is over its rate of {self.rate:g} {unit}/s (burst {self.burst}); "
            f"retry after {self.retry_after_s}s"
        )

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


async def take(
    state: ApiState,
    principal: Principal,
    cost: int,
    least_burst: int,
    log: logging.Logger,
    debit: bool = False,
) -> OverRate | None:
    """Take `cost` tokens from the tenant's bucket; an OverRate when it refuses, None when it admits.

    A cost over the bucket (a big body's bytes) takes a full bucket: it can pass, not often. With
    `debit` the tokens are taken even when refused (work already done). The limiter unreachable
    admits: losing it must not lose the tenant's data; /readyz reports Redis down."""
    rate, burst = bucket(state, principal, least_burst)
    if cost <= 0:
        return None
    try:
        decision = await state.limiter.take(principal.tenant, min(cost, burst), rate, burst, debit)
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable, admitting: %s", exc)
        state.metrics.redis_up.set(0)
        return None
    if decision.allowed:
        return None
    state.metrics.rate_limited.labels(principal.tenant).inc()
    return OverRate(principal.tenant, rate, burst, decision.retry_after_s)


async def charge(
    state: ApiState, principal: Principal, tokens: int, least_burst: int, log: logging.Logger
) -> None:
    """Tokens taken for work already done, refused or not (the bucket may go up to one burst into
    debt), counted in ragmon_api_cpu_debt_tokens_total; no answer changes, and the limiter
    unreachable charges nothing."""
    if tokens <= 0:
        return
    rate, burst = bucket(state, principal, least_burst)
    try:
        await state.limiter.take(principal.tenant, min(tokens, burst), rate, burst, debit=True)
        state.metrics.cpu_debt.labels(principal.tenant).inc(tokens)
    except (RedisError, OSError) as exc:
        log.warning("rate limiter unavailable, CPU debt not charged: %s", exc)
