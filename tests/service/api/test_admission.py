"""The ingestion routes' admission (service/api/admission.py), in process: both routes word a 429 and
a 401 from the one rate-limit and challenge code, as they did when each had its own copy."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from service.api import admission, routes_events, routes_otlp
from service.api.auth import AuthError, Principal
from service.api.otlp import JSON
from service.api.ratelimit import Decision


class _Counter:
    def __init__(self) -> None:
        self.value = 0.0

    def labels(self, *_: Any) -> _Counter:
        return self

    def inc(self, n: float = 1) -> None:
        self.value += n

    def set(self, v: float) -> None:
        self.value = v


class _Limiter:
    def __init__(self, decision: Decision | Exception) -> None:
        self.decision = decision
        self.taken: list[tuple[Any, ...]] = []

    async def take(self, tenant: str, events: int, rate: float, burst: int, debit: bool = False) -> Decision:
        self.taken.append((tenant, events, rate, burst, debit))
        if isinstance(self.decision, Exception):
            raise self.decision
        return self.decision


def _state(decision: Decision | Exception) -> Any:
    settings = SimpleNamespace(
        rate_limit_eps=100.0,
        rate_limit_burst=500,
        max_events_per_batch=1000,
        otlp_max_spans_per_request=20_000,
    )
    metrics = SimpleNamespace(rate_limited=_Counter(), redis_up=_Counter(), cpu_debt=_Counter())
    return SimpleNamespace(settings=settings, limiter=_Limiter(decision), metrics=metrics)


TENANT = Principal("acme", frozenset({"ingest"}), None, None)


def test_an_events_request_over_its_rate_is_a_429_naming_rate_and_burst() -> None:
    state = _state(Decision(False, 3))
    response = asyncio.run(routes_events._rate_limit(state, TENANT, 5))
    assert response is not None and response.status_code == 429
    assert response.headers["Retry-After"] == "3"
    assert json.loads(bytes(response.body)) == {
        "error": "tenant 'acme' is over its rate of 100 events/s (burst 1000); retry after 3s",
        "rule": "rate_limit",
    }
    assert state.limiter.taken == [("acme", 5, 100.0, 1000, False)]
    assert state.metrics.rate_limited.value == 1


def test_an_export_over_its_rate_is_a_429_in_otlp_status_form() -> None:
    state = _state(Decision(False, 2))
    response = asyncio.run(routes_otlp._rate_limit(state, TENANT, 50_000, JSON, debit=True))
    assert response is not None and response.status_code == 429
    assert response.headers["Retry-After"] == "2"
    status = json.loads(bytes(response.body))
    assert status["message"] == "tenant 'acme' is over its rate of 100 spans/s (burst 20000); retry after 2s"
    assert status["code"] == 8  # RESOURCE_EXHAUSTED
    assert state.limiter.taken == [
        ("acme", 20_000, 100.0, 20_000, True)
    ]  # a cost over the bucket takes it all


def test_admitted_nothing_to_pay_or_limiter_down_is_no_refusal() -> None:
    assert asyncio.run(routes_events._rate_limit(_state(Decision(True, 0)), TENANT, 5)) is None
    untouched = _state(Decision(False, 1))
    assert asyncio.run(routes_otlp._rate_limit(untouched, TENANT, 0, JSON)) is None
    assert untouched.limiter.taken == []
    down = _state(RedisConnectionError("gone"))
    assert asyncio.run(admission.take(down, TENANT, 5, 1000, logging.getLogger("t"))) is None
    assert down.metrics.redis_up.value == 0


def test_a_401_names_the_bearer_scheme_and_a_403_does_not() -> None:
    assert admission.challenge(AuthError(401, "no key")) == {"WWW-Authenticate": 'Bearer realm="ragmon"'}
    assert admission.challenge(AuthError(403, "wrong scope")) is None


def test_a_tenant_s_own_rate_and_burst_win_over_the_defaults_but_a_full_request_fits() -> None:
    own = Principal("acme", frozenset(), 7.5, 3)
    assert admission.bucket(_state(Decision(True, 0)), own, 1000) == (7.5, 1000)
    assert admission.bucket(_state(Decision(True, 0)), Principal("a", frozenset(), 7.5, 5000), 1000) == (
        7.5,
        5000,
    )
