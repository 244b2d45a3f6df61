"""A real OTLP/HTTP endpoint on 127.0.0.1 whose answers a test scripts.

Real sockets, real gzip, real protobuf parsing with opentelemetry-proto: a test
makes it answer what a collector or Phoenix rarely gives on demand (503, 400,
413, partial success), or sets `down` (every request answered 503).
Subclassed per signal (logs, traces) with the request type and the path.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Generic, TypeVar

R = TypeVar("R")


class OtlpCollector(Generic[R]):
    def __init__(self, path: str, parse: Callable[[bytes], R]) -> None:
        self.path = path
        self.requests: list[tuple[dict[str, str], R]] = []  # the accepted ones (answered 200), parsed
        self.answers: list[tuple[int, bytes]] = []  # scripted, in order; then 200 with an empty response
        self.down = False  # while True: every request is answered 503
        self.posts = 0
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                collector.posts += 1
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = parse(body)
                if collector.down:
                    status, answer = 503, b"collector restarting"
                else:
                    status, answer = collector.answers.pop(0) if collector.answers else (200, b"")
                if status == 200:
                    collector.requests.append((dict(self.headers), request))
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                """Quiet: the test asserts on what was received."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
