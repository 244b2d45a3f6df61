"""Ordinary traffic of the victim tenant during an attack, and what "unharmed" means.

`VictimTraffic` is a context manager: on entry a thread starts sending the
victim's batches (native traces, and OTLP traces when asked) and probing
/healthz; on exit it stops and its `report` holds every status and latency.
`assert_unharmed` checks the report; `wait_processed` checks the metrics
worker counted every trace the victim had accepted.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from tests.e2e.stack import UpStack
from tests.service.api.api_events import trace_event

ATTACKER, ATTACKER_KEY = "attacker", "rgm_hostile_attacker_0123456789"
VICTIM, VICTIM_KEY = "victim", "rgm_hostile_victim_0123456789"
# A request of an ordinary batch answers in milliseconds; one held this long was blocked by someone.
HELD_S = 5.0


@dataclass(frozen=True)
class Tenant:
    name: str
    key: str
    api: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def post(
        self,
        path: str,
        content: bytes,
        content_type: str = "application/json",
        timeout: float = 120,
        **headers: str,
    ) -> httpx.Response:
        return httpx.post(
            self.api + path,
            content=content,
            timeout=timeout,
            headers={**self.auth, "Content-Type": content_type, **headers},
        )


@dataclass
class VictimReport:
    statuses: Counter[int] = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)
    health_latencies_s: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    accepted_traces: int = 0

    def p99(self, values: list[float]) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else float("nan")


class VictimTraffic:
    """The victim's batches of `batch` native traces every `interval_s`, and a /healthz probe after each."""

    def __init__(
        self, victim: Tenant, *, batch: int = 10, interval_s: float = 0.1, otlp: bool = False
    ) -> None:
        self.victim = victim
        self.batch = batch
        self.interval_s = interval_s
        self.otlp = otlp
        self.report = VictimReport()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="victim-traffic", daemon=True)

    def __enter__(self) -> VictimTraffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=HELD_S * 4)

    def _run(self) -> None:
        with httpx.Client(timeout=HELD_S * 3) as client:
            while not self._stop.is_set():
                self._send(client)
                self._probe(client)
                self._stop.wait(self.interval_s)

    def _send(self, client: httpx.Client) -> None:
        if self.otlp:
            from tests.workers.assembler.oi_spans import rag_trace, traces_data

            content = traces_data([s for _ in range(self.batch) for s in rag_trace()]).SerializeToString()
            ctype, path = "application/x-protobuf", "/v1/traces"
        else:
            import orjson

            content = orjson.dumps({"events": [trace_event() for _ in range(self.batch)]})
            ctype, path = "application/json", "/v1/events"
        started = time.perf_counter()
        try:
            r = client.post(
                self.victim.api + path, content=content, headers={**self.victim.auth, "Content-Type": ctype}
            )
        except httpx.HTTPError as exc:
            self.report.failures.append(f"{path}: {type(exc).__name__}: {exc}")
            return
        self.report.latencies_s.append(time.perf_counter() - started)
        self.report.statuses[r.status_code] += 1
        if r.status_code in (200, 202):
            self.report.accepted_traces += self.batch
        else:
            self.report.failures.append(f"{path}: {r.status_code} {r.text[:300]}")

    def _probe(self, client: httpx.Client) -> None:
        started = time.perf_counter()
        try:
            client.get(self.victim.api + "/healthz")
        except httpx.HTTPError as exc:
            self.report.failures.append(f"/healthz: {type(exc).__name__}: {exc}")
            return
        self.report.health_latencies_s.append(time.perf_counter() - started)


def assert_unharmed(report: VictimReport, *, min_batches: int = 5) -> None:
    """Every victim batch accepted, none held for HELD_S or more, /healthz answering throughout."""
    sent = sum(report.statuses.values())
    assert not report.failures, (
        f"the victim was harmed: {report.failures[:5]} ({len(report.failures)} in all)"
    )
    assert sent >= min_batches, f"the victim sent only {sent} batches during the attack (held?): {report}"
    slowest = max(report.latencies_s)
    assert slowest < HELD_S, f"a victim batch took {slowest:.1f}s (p99 {report.p99(report.latencies_s):.3f}s)"
    assert max(report.health_latencies_s) < HELD_S, "/healthz was held during the attack"


_SAMPLE = re.compile(r"^ragmon_rag_queries_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)


def queries_counted(stack: UpStack, tenant: str) -> float:
    """The metrics worker's count of the tenant's traces (its own /metrics: no scrape delay)."""
    text = httpx.get(stack.workers["metrics"] + "/metrics", timeout=10).text
    return sum(float(m["value"]) for m in _SAMPLE.finditer(text) if f'tenant="{tenant}"' in m["labels"])


def settled_count(stack: UpStack, tenant: str, quiet_s: float = 3, timeout_s: float = 60) -> float:
    """The tenant's count once it stopped moving for `quiet_s` (what earlier tests sent has been consumed)."""
    deadline = time.monotonic() + timeout_s
    seen, since = queries_counted(stack, tenant), time.monotonic()
    while time.monotonic() - since < quiet_s:
        assert time.monotonic() < deadline, f"the count of {tenant}'s traces did not settle in {timeout_s}s"
        time.sleep(0.5)
        now = queries_counted(stack, tenant)
        if now != seen:
            seen, since = now, time.monotonic()
    return seen


def wait_processed(stack: UpStack, tenant: str, expected: float, timeout_s: float = 60) -> None:
    """Wait until the metrics worker has counted `expected` traces of the tenant in all."""
    deadline = time.monotonic() + timeout_s
    seen = queries_counted(stack, tenant)
    while seen < expected and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = queries_counted(stack, tenant)
    assert seen >= expected, (
        f"the metrics worker counted {seen:g} of {expected:g} traces of {tenant} in {timeout_s}s"
    )
