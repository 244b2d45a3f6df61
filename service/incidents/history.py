"""Alert history and user-signal rises read from a Prometheus-compatible store over its HTTP API.

Alertmanager keeps no history, so the store's own `ALERTS` and `ALERTS_FOR_STATE` series are the
record. The rules come from the store too (`/api/v1/rules`): the user-signal expressions are exactly the
ones it evaluates, with the thresholds of this deployment. Range queries are split so that no series
returns more than MAX_POINTS samples (Prometheus refuses a query over 11,000 points per series).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from service.incidents.leadtime import GUARDRAIL_CATEGORIES, USER_SIGNALS, Episode, runs

MAX_POINTS = 10_000


class HistoryError(RuntimeError):
    """The store could not be read (unreachable, or it answered with an error)."""


@dataclass(frozen=True)
class AlertRule:
    name: str
    query: str
    labels: dict[str, str]

    @property
    def user_signal(self) -> bool:
        return self.labels.get("guardrail") in USER_SIGNALS

    @property
    def guardrail(self) -> bool:
        return self.labels.get("category") in GUARDRAIL_CATEGORIES and not self.user_signal


class History:
    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.client = httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        self.client.close()

    def _get(self, path: str, **params: Any) -> Any:
        try:
            response = self.client.get(f"{self.url}{path}", params=params)
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise HistoryError(f"{self.url}{path}: {exc}") from None
        if body.get("status") != "success":
            raise HistoryError(f"{self.url}{path}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def alert_rules(self) -> list[AlertRule]:
        data = self._get("/api/v1/rules", type="alert")
        return [
            AlertRule(r["name"], r["query"], dict(r.get("labels") or {}))
            for group in data.get("groups", [])
            for r in group.get("rules", [])
            if r.get("type") == "alerting"
        ]

    def range(self, query: str, span: Span) -> list[dict[str, Any]]:
        """A range query split into chunks of at most MAX_POINTS steps, series merged by labels."""
        merged: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
        step_s = span.step_s
        chunk = step_s * (MAX_POINTS - 1)
        t = span.start
        while t <= span.end:
            stop = min(span.end, t + chunk)
            for series in self._get("/api/v1/query_range", query=query, start=t, end=stop, step=step_s)[
                "result"
            ]:
                key = tuple(sorted(series["metric"].items()))
                into = merged.setdefault(key, {"metric": series["metric"], "values": []})
                into["values"].extend(series["values"])
            t = stop + step_s
        return list(merged.values())


@dataclass(frozen=True)
class Span:
    """What to read: unix seconds from `start` to `end` at `step_s`, one tenant or all (None)."""

    start: float
    end: float
    step_s: float
    tenant: str | None = None

    def tenant_filter(self) -> str:
        return "" if self.tenant is None else f", tenant={json.dumps(self.tenant)}"  # quotes escaped


def alert_episodes(history: History, rules: list[AlertRule], span: Span) -> list[Episode]:
    """Every firing run of a guardrail alert (not the user-signal ones), with its pending start."""
    names = sorted({r.name for r in rules if r.guardrail})
    if not names:
        return []
    selector = f'alertname=~"{"|".join(names)}"{span.tenant_filter()}'
    firing = history.range(f'ALERTS{{alertstate="firing", {selector}}}', span)
    since: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
    for series in history.range(f"ALERTS_FOR_STATE{{{selector}}}", span):
        key = tuple(sorted((k, v) for k, v in series["metric"].items() if k != "__name__"))
        since[key] = [(float(ts), float(v)) for ts, v in series["values"]]
    out = []
    for series in firing:
        labels = {k: v for k, v in series["metric"].items() if k not in ("__name__", "alertstate")}
        states = since.get(tuple(sorted(labels.items())), [])
        for a, b in runs((float(ts) for ts, _ in series["values"]), span.step_s):
            active = next((v for ts, v in states if a - span.step_s <= ts <= a + span.step_s), None)
            out.append(Episode(labels["alertname"], labels.get("tenant", ""), a, b, active, labels))
    return sorted(out, key=lambda e: (e.start, e.name, e.tenant))


def user_rises(history: History, rules: list[AlertRule], span: Span) -> list[Episode]:
    """Every run in which a user-signal alert's expression holds for a tenant (its `for:` not applied)."""
    out = []
    for rule in rules:
        if not rule.user_signal:
            continue
        for series in history.range(rule.query, span):
            t = series["metric"].get("tenant", "")
            if span.tenant is not None and t != span.tenant:
                continue
            for a, b in runs((float(ts) for ts, _ in series["values"]), span.step_s):
                out.append(Episode(rule.name, t, a, b, None, dict(series["metric"])))
    return sorted(out, key=lambda e: (e.start, e.name, e.tenant))
