"""`ragmon api --workers N`: N API processes behind one port, connections dealt out evenly.

The parent owns the listening socket and does nothing but accept: each new
connection's file descriptor is handed (SCM_RIGHTS over a Unix socket pair)
to the next child in turn, and the child serves it with uvicorn's own HTTP
protocol. Why not SO_REUSEPORT or a shared accept socket:

- SO_REUSEPORT spreads connections by a hash of their addresses. With a few
  keep-alive clients (a handful of app replicas, or a load test) that is a
  coin toss: four connections land 3:1 or 4:0 on two processes more often
  than 2:2, and the busy process sets the latency of everything. Measured
  with the ingest benchmark: 4,300 to 5,260 events/s between runs depending
  on the split.
- A shared accept socket is worse: whichever process wakes first accepts the
  whole burst.

Round-robin over new connections gives every process the same number of
connections. HandoffServer drives uvicorn's Server from its internals (server_state,
lifespan.state, config.http_protocol_class, startup/shutdown(sockets)): tests/bench/bench_private.py
measures the gain over the public SO_REUSEPORT way (docs/throughput.md, "Private internals") and
tests/service/api/test_private_internals.py fails on a uvicorn that moves them. The children's Prometheus metrics are shared through files in
PROMETHEUS_MULTIPROC_DIR, so /metrics answers for all of them whichever child
serves the scrape.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import uvicorn

from service.api.connections import config as api_config
from service.api.connections import tune_process
from service.api.settings import ApiSettings

log = logging.getLogger("ragmon.api.processes")


def listening_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock


def run_api_processes(
    workers: int, host: str, port: int, log_level: str, metrics_at: tuple[str, int] | None = None
) -> int:
    """Parent: accept, deal each connection to the next live child; forward SIGTERM/SIGINT.

    The parent also serves /metrics on `metrics_at` (its own port), for every child at once.
    """
    from service.api.metrics import multiprocess_registry, serve_metrics

    logging.basicConfig(level=logging.INFO, format="%(asctime)s ragmon-api %(levelname)s %(message)s")
    listener = listening_socket(host, port)
    listener.settimeout(0.5)  # wake up to notice a stop request or a dead child
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with tempfile.TemporaryDirectory(prefix="ragmon-api-metrics-") as metrics_dir:
        scrape = serve_metrics(*metrics_at, multiprocess_registry(metrics_dir)) if metrics_at else None
        children: list[tuple[subprocess.Popen[bytes], socket.socket]] = []
        for _ in range(workers):
            # SEQPACKET keeps one message per connection handed over; an empty read is the parent's EOF.
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir}
            argv = [
                sys.executable,
                "-m",
                "service.cli",
                "api",
                "--log-level",
                log_level,
                "--connection-fd",
                str(theirs.fileno()),
            ]
            children.append((subprocess.Popen(argv, env=env, pass_fds=(theirs.fileno(),)), ours))
            theirs.close()
        try:
            _deal_connections(listener, children, lambda: stopping)
        finally:
            listener.close()
            for child, channel in children:
                channel.close()  # a child reading its channel sees EOF and stops too
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            codes = [child.wait() for child, _ in children]
            if scrape is not None:
                scrape.close()
    # uvicorn re-raises the stop signal after a clean shutdown: a child that ended by the
    # SIGTERM we forwarded stopped as asked.
    failures = [c for c in codes if c not in (0, -signal.SIGTERM, -signal.SIGINT)]
    if not failures:
        return 0
    return (
        128 - failures[0] if failures[0] < 0 else failures[0]
    )  # killed by signal N: 128 + N, as a shell says


def _deal_connections(
    listener: socket.socket,
    children: list[tuple[subprocess.Popen[bytes], socket.socket]],
    stopping: Callable[[], bool],
) -> None:
    live = list(range(len(children)))
    turn = 0
    while not stopping():
        for i in list(live):
            code = children[i][0].poll()
            if code is not None:
                live.remove(i)
                log.error("API process %d exited with %s; %d left", children[i][0].pid, code, len(live))
        if not live:
            return
        try:
            conn, _ = listener.accept()
        except (TimeoutError, InterruptedError):
            continue
        with conn:
            for _ in range(len(live)):
                i = live[turn % len(live)]
                turn += 1
                try:
                    socket.send_fds(children[i][1], [b"c"], [conn.fileno()])
                    break
                except OSError as exc:  # the child went away between poll() and now
                    log.warning("could not hand a connection to API process %d: %s", children[i][0].pid, exc)
        # Our copy of the descriptor is closed here; the child's copy keeps the connection open.


def serve_handed_connections(
    app: Any, channel_fd: int, log_level: str, settings: ApiSettings | None = None
) -> int:
    """Child: serve the connections the parent hands over on `channel_fd` with uvicorn's protocol
    and the API's connection limits (service/api/connections.py)."""
    tune_process()
    config = api_config(app, settings or ApiSettings(), log_level=log_level)
    HandoffServer(config, socket.socket(fileno=channel_fd)).run(sockets=[])
    return 0


class HandoffServer(uvicorn.Server):
    """uvicorn's Server with no listening socket of its own: connections arrive over a channel.

    Lifespan, graceful shutdown and the connection bookkeeping are uvicorn's; only where the
    connections come from differs (`connect_accepted_socket` with uvicorn's HTTP protocol).
    """

    def __init__(self, config: uvicorn.Config, channel: socket.socket) -> None:
        super().__init__(config)
        self._channel = channel

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])
        loop = asyncio.get_running_loop()
        self._channel.setblocking(False)
        loop.add_reader(self._channel.fileno(), self._receive, loop)

    def _protocol(self) -> asyncio.Protocol:
        return self.config.http_protocol_class(  # type: ignore[call-arg]
            config=self.config, server_state=self.server_state, app_state=self.lifespan.state
        )

    def _receive(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                msg, fds, _flags, _addr = socket.recv_fds(self._channel, 16, 16)
            except BlockingIOError:
                return
            except OSError as exc:
                log.error("connection channel failed: %s; stopping", exc)
                msg, fds = b"", []
            for fd in fds:
                conn = socket.socket(fileno=fd)
                conn.setblocking(False)
                loop.create_task(loop.connect_accepted_socket(self._protocol, conn))
            if not msg:  # the parent is gone: nobody will hand us connections any more
                self._stop_receiving(loop)
                self.should_exit = True
                return

    def _stop_receiving(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._channel.fileno() >= 0:
            loop.remove_reader(self._channel.fileno())
            self._channel.close()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._stop_receiving(asyncio.get_running_loop())
        await super().shutdown(sockets)
