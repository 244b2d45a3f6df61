"""Which query-drift windows are flagged right now: written by the drift worker, read by the review sampler.

One Redis hash per tenant, `<drift key prefix>:flagged:<tenant>`: field = the
intent of the window ("all" for every query of the tenant), value = the time
(epoch seconds) of the test that found drift. The drift worker sets the field
when a test finds drift and removes it when a later test of that window does
not (any signal: the app's embeddings or the pinned encoder). A flag not
confirmed by a test for `max_age_s` is stale (a retired window) and ignored.
"""

from __future__ import annotations

from typing import Any

ALL_INTENTS = "all"  # the drift worker's intent label of the window over every query of a tenant
DEFAULT_PREFIX = "ragmon:drift"


def flagged_key(prefix: str, tenant: str) -> str:
    return f"{prefix}:flagged:{tenant}"


def record_flag(pipe: Any, prefix: str, tenant: str, intent: str, drifted: bool, tested_at: float) -> None:
    """Queue on `pipe` the flag of one window after a test (set when drifted, cleared when not)."""
    key = flagged_key(prefix, tenant)
    if drifted:
        pipe.hset(key, intent, repr(float(tested_at)))
    else:
        pipe.hdel(key, intent)


def flagged_windows(
    client: Any, prefix: str, tenants: list[str], now: float, max_age_s: float
) -> dict[str, frozenset[str]]:
    """tenant -> intents whose window is flagged now ("all" for the whole tenant); one round trip."""
    if not tenants:
        return {}
    pipe = client.pipeline(transaction=False)
    for tenant in tenants:
        pipe.hgetall(flagged_key(prefix, tenant))
    out: dict[str, frozenset[str]] = {}
    for tenant, fields in zip(tenants, pipe.execute(), strict=True):
        live = frozenset(_text(k) for k, v in fields.items() if now - float(v) <= max_age_s)
        if live:
            out[tenant] = live
    return out


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
