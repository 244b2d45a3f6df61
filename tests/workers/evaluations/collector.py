"""A real OTLP/HTTP logs endpoint on 127.0.0.1 for the evaluation exporter's tests.

Real sockets, real gzip, real protobuf parsing with opentelemetry-proto; its
answers are scripted (503, 400, 413, partial success) or it is `down` (503).
"""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord


class Collector:
    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], ExportLogsServiceRequest]] = []
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
                request = ExportLogsServiceRequest.FromString(body)
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
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/logs"

    def records(self) -> list[tuple[dict[str, Any], LogRecord]]:
        """(resource attributes, record) of every accepted record, in order."""
        return [
            (attributes(rl.resource.attributes), r)
            for _, req in self.requests
            for rl in req.resource_logs
            for sl in rl.scope_logs
            for r in sl.log_records
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _plain(v: AnyValue) -> Any:
    return getattr(v, v.WhichOneof("value"))


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _plain(kv.value) for kv in kvs}
