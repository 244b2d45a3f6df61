"""The attacks of issue 23 on the API's limits, each one request (or one set of connections) as an
attacker sends it, and the refusal each must get (or 429: a big body pays the rate limiter by its
decompressed bytes before it is parsed, so a repeated attack is soon over its rate). Shared by tests/e2e/hostile/test_limits.py and
the fairness benchmark (tests/bench/bench_fairness.py)."""

from __future__ import annotations

import gzip
import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import orjson

from tests.e2e.hostile.victim import Tenant
from tests.service.api.api_events import trace_event
from tests.service.api.otlp_builders import export_of, new_trace_id, span

PB = "application/x-protobuf"


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6)


def long_at_runs(attacker: Tenant) -> int:
    """Texts of long `@` and digit runs (once a super-linear pattern for the PII redactor)."""
    events = [trace_event(query={"text": ("@" * 4000 + "1" * 4000) * 2}) for _ in range(200)]
    r = attacker.post("/v1/events", orjson.dumps({"events": events}))
    assert r.status_code in (202, 207, 429), r.text[:300]
    return r.status_code


_EMPTY_RESOURCES = _gz(b"\x0a\x00" * 10_000_000)  # ten million empty ResourceSpans, about 20 KB


def empty_resource_spans(attacker: Tenant) -> int:
    r = attacker.post("/v1/traces", _EMPTY_RESOURCES, PB, **{"Content-Encoding": "gzip"})
    assert r.status_code in (413, 429), r.content[:300]  # 429: its 20 MB inflated are paid before the count
    return r.status_code


_HUGE_ATTRIBUTE = _gz(
    export_of([span(new_trace_id(), attrs={"input.value": "a" * 17_000_000})]).SerializeToString()
)
_HUGE_RECORD = _gz(
    export_of(
        [span(new_trace_id(), attrs={f"attr.{i}": "b" * 60_000 for i in range(280)})]
    ).SerializeToString()
)


def huge_attribute(attacker: Tenant) -> int:
    """One 17 MB attribute (truncated, 200), then one span of 280 attributes of 60,000 characters:
    its record is over MAX_RECORD_BYTES, refused alone with a status OTLP exporters do not retry."""
    first = attacker.post("/v1/traces", _HUGE_ATTRIBUTE, PB, **{"Content-Encoding": "gzip"})
    assert first.status_code in (200, 413, 429), first.content[:300]  # 413: over max_decompressed_bytes
    second = attacker.post("/v1/traces", _HUGE_RECORD, PB, **{"Content-Encoding": "gzip"})
    assert second.status_code in (400, 429), second.content[:300]
    if second.status_code == 400:
        assert b"max_record_bytes" in second.content and b"Kafka" not in second.content
    return second.status_code


_EMPTY_EVENTS = _gz(b'{"events":[' + b",".join([b"{}"] * 6_900_000) + b"]}")


def huge_events_array(attacker: Tenant) -> int:
    r = attacker.post("/v1/events", _EMPTY_EVENTS, **{"Content-Encoding": "gzip"})
    assert (r.status_code, r.json()["rule"]) in ((413, "max_length"), (429, "rate_limit")), r.text[:300]
    return r.status_code


_DEEP = _gz(b'{"events":[{"type":"trace","body":{"m":' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}}]}")


def deep_nesting(attacker: Tenant) -> int:
    r = attacker.post("/v1/events", _DEEP, **{"Content-Encoding": "gzip"})
    assert (r.status_code, r.json()["rule"]) in ((400, "max_json_depth"), (429, "rate_limit")), r.text[:300]
    return r.status_code


def slow_clients(attacker: Tenant, connections: int = 300, hold_s: float = 2.0) -> list[socket.socket]:
    """Connections that send half a request and stop: returned still open, for the caller to watch."""
    url = urlsplit(attacker.api)
    held = []
    for _ in range(connections):
        sock = socket.create_connection((url.hostname, url.port), timeout=5)
        sock.sendall(b"POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + attacker.key.encode())
        held.append(sock)
    time.sleep(hold_s)
    return held


def closed_by_server(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        while sock.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except OSError:
        return True


ATTACKS: dict[str, Callable[[Tenant], object]] = {
    "long_at_runs": long_at_runs,
    "empty_resource_spans": empty_resource_spans,
    "huge_attribute": huge_attribute,
    "huge_events_array": huge_events_array,
    "deep_nesting": deep_nesting,
}
