"""Connection limits of the API's HTTP server: slow clients cannot hold every connection.

uvicorn bounds idle keep-alive connections (timeout_keep_alive) and the
number of connections and tasks (limit_concurrency: beyond it, 503), but a
client that opens a connection and sends half a request line, or its headers
a byte at a time, holds a connection, a parser and a descriptor for as long
as it likes: uvicorn has no header timeout. HeaderDeadlineProtocol is
uvicorn's own HTTP protocol with one: a request's headers must be complete
within `header_timeout_s` of the connection opening or of the request's
first byte, else the connection is closed (an idle keep-alive connection is
uvicorn's timeout_keep_alive's). The body has its own deadline,
enforced where it is read (routes_events._read_body: 408).

Nor does uvicorn bound a request's size before its body: httptools joins a
header value (and the URL) split over reads with `bytes +=`, so one header
of 96 MB sent within the deadline cost seconds of CPU on the event loop
(quadratic) and its whole size in memory, every other request waiting. The
protocol feeds the parser at most `max_header_bytes` while a request's
headers are incomplete and answers 431 naming the rule beyond it; after
them, a chunked body's framing (chunk sizes, extensions, trailers, which
are headers after the body) may exceed the body by as much (else 413).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.api.settings import ApiSettings


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """HttpToolsProtocol that closes a connection whose request headers are not complete in time."""

    header_timeout_s = 10.0
    max_header_bytes = 65_536

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        # Bytes fed to the parser while a request's headers are incomplete; None while a body is read.
        self._header_bytes: int | None = 0
        # While a body is read: the bytes fed (framing included) and the body's own bytes.
        self._body_wire = self._body_bytes = 0

    def data_received(self, data: bytes) -> None:
        """The parser gets at most max_header_bytes before a request's headers are complete (one
        more byte of request line and headers is a 431); a body is fed as it comes, but its chunked
        framing (chunk sizes, extensions, trailers: headers after the body) may exceed the body by
        max_header_bytes at most (413), so trailers are not a way around the header limit."""
        while self._header_bytes is not None and data:
            room = self.max_header_bytes - self._header_bytes
            if room <= 0:
                self._refuse(
                    b"431 Request Header Fields Too Large",
                    f"the request line and headers exceed {self.max_header_bytes} bytes",
                    "headers",
                    "max_header_bytes",
                )
                return
            piece, data = (data, b"") if len(data) <= room else (data[:room], data[room:])
            self._header_bytes += len(piece)
            super().data_received(piece)
            if self.transport.is_closing():
                return
        if data:
            self._body_wire += len(data)
            super().data_received(data)
            if self._header_bytes is None and self._body_wire - 2 * self._body_bytes > self.max_header_bytes:
                self._refuse(
                    b"413 Content Too Large",
                    f"the chunked framing (chunk sizes, extensions and trailers) exceeds the body by more "
                    f"than {self.max_header_bytes} bytes",
                    "body",
                    "chunked_framing",
                )

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def _refuse(self, status: bytes, message: str, field: str, rule: str) -> None:
        self._disarm()
        self._header_bytes = None
        cycle = self.cycle
        # The application waiting for this body sees a disconnect (its own answer is not written).
        if cycle is None or cycle.response_complete or not cycle.response_started:
            body = json.dumps({"error": message, "field": field, "rule": rule}).encode()
            self.transport.write(
                b"HTTP/1.1 %s\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (status, len(body), body)
            )
        self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        self._header_bytes = None
        self._body_wire = self._body_bytes = 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._header_bytes = 0  # the next request's headers are counted from here

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()  # a keep-alive connection's next request: its headers are on the clock from its first byte

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


# How long a worker thread (a big body's decode) may hold the GIL before the event loop gets it
# back: CPython's default, 5 ms, adds up to that to every step of every other request.
SWITCH_INTERVAL_S = 0.0005


def tune_process() -> None:
    """Called once where an API process starts serving (the loop's thread and decode threads share the GIL)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def protocol_for(settings: ApiSettings) -> type[HeaderDeadlineProtocol]:
    return type(
        "ApiHttpProtocol",
        (HeaderDeadlineProtocol,),
        {"header_timeout_s": settings.header_timeout_s, "max_header_bytes": settings.max_header_bytes},
    )


# Seconds uvicorn lets in-flight requests finish after SIGTERM; deploy grace periods must outlast it.
GRACEFUL_SHUTDOWN_S = 10


def server_options(settings: ApiSettings) -> dict[str, Any]:
    """uvicorn.Config keywords of the API's connection limits (also used by `--workers N` children)."""
    return {
        "http": protocol_for(settings),
        "limit_concurrency": settings.limit_concurrency,
        "timeout_keep_alive": settings.keep_alive_timeout_s,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
    }


def config(app: Any, settings: ApiSettings, **kwargs: Any) -> uvicorn.Config:
    return uvicorn.Config(app, **{**server_options(settings), **kwargs})
