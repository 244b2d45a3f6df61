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
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.api.settings import ApiSettings


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """HttpToolsProtocol that closes a connection whose request headers are not complete in time."""

    header_timeout_s = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

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
        super().on_headers_complete()

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
    return type("ApiHttpProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": settings.header_timeout_s})


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
