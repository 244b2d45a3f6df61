"""Slow clients cannot hold connections (issue 23, item 7): header and body deadlines.

uvicorn closes idle keep-alive connections but has no deadline for a request's headers: a
connection with half a request held it open for good. HeaderDeadlineProtocol closes it after
header_timeout_s; a body that does not arrive within body_timeout_s is a 408 naming the rule.
Request line and headers over max_header_bytes are a 431 naming the rule, before more is read.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
import weakref
from collections.abc import Callable

import orjson
import pytest
from google.rpc.status_pb2 import Status

from tests.service.api.api_events import ACME_KEY, GLOBEX_KEY, event, trace_body
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


def _request(path: str, headers: bytes = b"", body: bytes = b"", method: bytes = b"GET") -> bytes:
    length = b"Content-Length: %d\r\n" % len(body) if body else b""
    return method + b" " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + headers + length + b"\r\n" + body


# Bytes read past one reply (pipelined replies may arrive in one read), kept for the next _reply.
_UNREAD: weakref.WeakKeyDictionary[socket.socket, bytes] = weakref.WeakKeyDictionary()


def _reply(sock: socket.socket) -> bytes:
    """One reply of a server that answers with a Content-Length (or closes); what was read past
    it is the start of the next reply on that socket."""
    sock.settimeout(10)
    data = _UNREAD.pop(sock, b"")
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    if len(rest) > length:
        _UNREAD[sock] = rest[length:]
    return head + b"\r\n\r\n" + rest[:length]


@pytest.mark.slow
def test_headers_over_the_limit_are_a_431_before_they_are_read(
    start_api: Callable[..., RunningApi], redis_client: object
) -> None:
    """httptools joins a header split over reads with `bytes +=`: a 96 MB header held the event
    loop for 3 s (every tenant's /healthz waited) and cost its size in memory. Now the parser is fed
    at most max_header_bytes before the headers are complete; the refusal names the rule."""
    api = start_api()
    limit = api.settings.max_header_bytes
    with _connect(api) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = 0
        try:
            while sent < 8 * 1024 * 1024:  # a well-behaved server answers long before this is sent
                sock.sendall(b"a" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = _reply(sock)
    assert reply.startswith(b"HTTP/1.1 431"), reply[:200]
    assert json.loads(reply.partition(b"\r\n\r\n")[2]) == {
        "error": f"the request line and headers exceed {limit} bytes",
        "field": "headers",
        "rule": "max_header_bytes",
    }
    assert api.http.get("/healthz").status_code == 200
    with _connect(api) as sock:  # many small headers count alike
        many = b"".join(b"X-%d: 1\r\n" % i for i in range(limit // 8))
        sock.sendall(_request("/healthz", many))
        assert _reply(sock).startswith(b"HTTP/1.1 431")


@pytest.mark.slow
def test_headers_under_the_limit_and_big_bodies_are_served(
    start_api: Callable[..., RunningApi], redis_client: object
) -> None:
    """The limit is on the request line and headers of each request, never on a body, and each
    request of a keep-alive connection is counted afresh."""
    api = start_api()
    near = b"X-Near: " + b"a" * (api.settings.max_header_bytes - 200) + b"\r\n"
    padded = b'{"events": [' + orjson.dumps(event("trace", trace_body())) + b"]" + b" " * 200_000 + b"}"
    auth = b"Content-Type: application/json\r\nAuthorization: Bearer " + ACME_KEY.encode() + b"\r\n"
    with _connect(api) as sock:
        for _ in range(3):
            sock.sendall(_request("/healthz", near))
            assert _reply(sock).startswith(b"HTTP/1.1 200")
        sock.sendall(_request("/v1/events", auth, padded, b"POST"))
        assert _reply(sock).startswith(b"HTTP/1.1 202")
        sock.sendall(_request("/healthz", near) + _request("/healthz", near))  # pipelined: each counted alone
        assert _reply(sock).startswith(b"HTTP/1.1 200")
        assert _reply(sock).startswith(b"HTTP/1.1 200")


def _chunked(body: bytes, size: int, trailer: bytes = b"") -> bytes:
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)
    )
    return chunks + b"0\r\n" + trailer + b"\r\n"


_CHUNKED_POST = (
    b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer "
    + ACME_KEY.encode()
    + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
)


@pytest.mark.slow
def test_trailers_and_chunk_framing_over_the_limit_are_a_413(
    start_api: Callable[..., RunningApi], redis_client: object
) -> None:
    """Trailers are headers after a chunked body: they went around the header limit (a 48 MB trailer
    held the event loop 1.6 s). The framing of a body (chunk sizes, extensions, trailers) may exceed the
    body by max_header_bytes at most; beyond that a 413 names the rule."""
    api = start_api()
    batch = orjson.dumps({"events": [event("trace", trace_body())]})
    for attack in (
        _chunked(batch, 1024, b"X-T: " + b"a" * (4 * 1024 * 1024) + b"\r\n"),  # one long trailer
        _chunked(batch[:-1] + b" " * 100_000 + b"}", 1),  # five bytes of framing for each byte of body
        b"%x;e=%s\r\n%s\r\n0\r\n\r\n" % (len(batch), b"a" * (4 * 1024 * 1024), batch),  # a chunk extension
    ):
        with _connect(api) as sock:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(_CHUNKED_POST + attack)
            reply = _reply(sock)
        assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
        assert json.loads(reply.partition(b"\r\n\r\n")[2])["rule"] == "chunked_framing"
    assert api.http.get("/healthz").status_code == 200
    with _connect(api) as sock:  # small chunks and a few trailers are a body as any other
        sock.sendall(_CHUNKED_POST + _chunked(batch, 16, b"X-Checksum: 0123456789abcdef\r\n"))
        assert _reply(sock).startswith(b"HTTP/1.1 202")


@pytest.mark.slow
def test_a_tenants_bodies_in_flight_are_bounded_and_another_tenant_is_not(
    start_api: Callable[..., RunningApi], redis_client: object
) -> None:
    """Bodies are read before the rate limiter can count them: one tenant's concurrent uploads could
    hold limit_concurrency x max_body_bytes (1,000 x 10 MiB) in the process every tenant shares. Its requests
    now hold at most body_bytes_per_tenant of body bytes; a body passing it is a 429 naming the rule,
    another tenant's share is its own, and a finished request gives its bytes back."""
    api = start_api(body_bytes_per_tenant=300_000)
    padded = b'{"events": [' + orjson.dumps(event("trace", trace_body())) + b"]" + b" " * 200_000 + b"}"
    auth = b"Content-Type: application/json\r\nAuthorization: Bearer " + ACME_KEY.encode() + b"\r\n"
    with _connect(api) as slow:  # acme's upload under way: 200 KB of its body held
        slow.sendall(_request("/v1/events", auth, padded, b"POST")[:-10_000])
        time.sleep(0.5)
        second = api.post(content=padded)
        assert second.status_code == 429 and second.json()["rule"] == "body_bytes_per_tenant", second.text
        assert second.headers["Retry-After"]
        otlp = api.http.post(
            "/v1/traces",
            content=b"\n" + b"\x00" * 200_000,
            headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {ACME_KEY}"},
        )
        assert otlp.status_code == 429 and "body_bytes_per_tenant" in Status.FromString(otlp.content).message
        assert api.post(content=padded, key=GLOBEX_KEY).status_code == 202
        slow.sendall(_request("/v1/events", auth, padded, b"POST")[-10_000:])
        assert _reply(slow).startswith(b"HTTP/1.1 202")
    assert api.post(content=padded).status_code == 202
