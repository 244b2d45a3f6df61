"""Fixtures for the simulator's tests: fixed clocks, small scenarios, a real HTTP server.

The server is a stdlib ThreadingHTTPServer on 127.0.0.1 that records every
request it receives (headers, decoded events) and answers with whatever the
test's responder returns. The sender talks to it over real sockets.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from service.simulate import Scenario, SimEvent, generate_events, parse_scenario

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

Reply = tuple[int, dict[str, str], dict[str, Any] | None]
Responder = Callable[[int, list[dict[str, Any]]], Reply]


def _small(**fields: Any) -> Scenario:
    base: dict[str, Any] = {"seed": 5, "duration_s": 30, "rate": 20, "tenants": ["acme", "globex"]}
    return parse_scenario(base | fields)


@pytest.fixture(scope="session")
def start() -> datetime:
    return START


@pytest.fixture(scope="session")
def small() -> Callable[..., Scenario]:
    """A 30 s scenario at 20 requests/s (about 600 requests), fields overridable."""
    return _small


@pytest.fixture(scope="session")
def events_of() -> Callable[..., list[SimEvent]]:
    def generate(scenario: Scenario, start: datetime = START) -> list[SimEvent]:
        return list(generate_events(scenario, start))

    return generate


@dataclass
class Received:
    headers: dict[str, str]
    events: list[dict[str, Any]]
    status: int


@dataclass
class RecordingApi:
    url: str
    responder: Responder
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accepted_ids(self) -> list[str]:
        return [e["id"] for r in self.received if r.status in (202, 207) for e in r.events]


def _accept_all(_: int, events: list[dict[str, Any]]) -> Reply:
    return 202, {}, {"accepted": len(events)}


def _handler(api: RecordingApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            events = json.loads(raw)["events"]
            with api.lock:
                index = len(api.received)
                status, headers, body = api.responder(index, events)
                api.received.append(Received(dict(self.headers), events, status))
            payload = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def recording_api() -> Iterator[RecordingApi]:
    api = RecordingApi(url="", responder=_accept_all)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield api
    server.shutdown()
    server.server_close()
    thread.join(5)
