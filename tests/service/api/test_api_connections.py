"""Slow clients cannot hold connections (issue 23, item 7): header and body deadlines.

uvicorn closes idle keep-alive connections but has no deadline for a request's headers: a
connection with half a request held it open for good. HeaderDeadlineProtocol closes it after
header_timeout_s; a body that does not arrive within body_timeout_s is a 408 naming the rule.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from tests.service.api.api_events import ACME_KEY
from tests.service.api.api_harness import RunningApi


def _connect(api: RunningApi) -> socket.socket:
    return socket.create_connection(("127.0.0.1", api.port), timeout=5)


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes the connection (EOF) within `seconds`."""
    sock.settimeout(seconds)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_half_sent_headers_are_closed_after_the_header_deadline(
    start_api: Callable[..., RunningApi], redis_client: object
) -> None:
    api = start_api(header_timeout_s=0.5, keep_alive_timeout_s=30)
    held = [_connect(api) for _ in range(20)]
    started = time.monotonic()
    for sock in held:
        sock.sendall(b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: appl")
    assert all(_closed_within(sock, 3) for sock in held)
    assert time.monotonic() - started < 3
    assert api.http.get("/healthz").status_code == 200
    for sock in held:
        sock.close()


def test_a_connection_that_never_sends_is_closed_too(start_api: Callable[..., RunningApi]) -> None:
    api = start_api(header_timeout_s=0.5, keep_alive_timeout_s=30)
    with _connect(api) as sock:
        assert _closed_within(sock, 3)


def test_a_slow_body_is_a_408_naming_the_rule(
    start_api: Callable[..., RunningApi], redis_client: object
) -> None:
    api = start_api(body_timeout_s=0.5)
    with _connect(api) as sock:
        sock.sendall(
            b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + ACME_KEY.encode() + b'\r\nContent-Length: 1000\r\n\r\n{"events"'
        )
        sock.settimeout(5)
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 408") and b"body_timeout" in reply


def test_keep_alive_requests_in_time_are_served_on_one_connection(
    start_api: Callable[..., RunningApi],
) -> None:
    api = start_api(header_timeout_s=0.5, keep_alive_timeout_s=5)
    with _connect(api) as sock:
        for _ in range(3):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            time.sleep(0.8)  # idle longer than the header deadline: keep-alive's to close, not the deadline's
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # then half a request on the same connection
        assert _closed_within(sock, 3)
