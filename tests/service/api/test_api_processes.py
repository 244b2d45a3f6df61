"""`ragmon api --workers 2`: two processes behind one port, connections dealt out evenly, one view of metrics."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import httpx
import orjson

from service.local.embedded import free_port, wait_for_port


def _ready(client: httpx.Client | None, url: str) -> bool:
    """/readyz answered 200. A child still importing (minutes on a loaded machine) holds a
    connection handed to it without answering: that is not ready yet, not a failure."""
    try:
        r = client.get(url, timeout=15) if client is not None else httpx.get(url, timeout=15)
    except httpx.TimeoutException:
        return False
    return r.status_code == 200


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _wait_children(proc: subprocess.Popen, n: int, timeout: float = 60) -> list[int]:
    """The parent's children once there are `n` of them: the parent binds the port before it
    starts them, so an open port says nothing yet about how many processes serve it."""
    deadline = time.monotonic() + timeout
    while len(children := _children(proc.pid)) < n:
        assert proc.poll() is None, f"ragmon api exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"{len(children)} of {n} API processes after {timeout} s"
        time.sleep(0.1)
    return children


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def _server_side_inode(server_port: int, client_port: int) -> str:
    """The inode of the server's end of the TCP connection from `client_port` (from /proc/net/tcp)."""
    want_local, want_remote = f"{server_port:04X}", f"{client_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        local, remote = cols[1].split(":")[1], cols[2].split(":")[1]
        if local == want_local and remote == want_remote:
            return cols[9]
    raise AssertionError(f"no server socket for client port {client_port}")


def _post(sock: socket.socket, port: int, body: bytes) -> int:
    head = (
        f"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer k\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + body)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    header, _, rest = data.partition(b"\r\n\r\n")
    length = int(
        [h for h in header.split(b"\r\n") if h.lower().startswith(b"content-length:")][0].split(b":")[1]
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    return int(header.split(b" ")[1])


def _trace(i: int) -> dict[str, object]:
    return {
        "type": "trace",
        "id": str(uuid.uuid4()),
        "timestamp": datetime.now(UTC).isoformat(),
        "body": {"trace_id": f"t{i}", "request_id": f"r{i}", "query": {"text": "q"}},
    }


def test_two_api_processes_share_the_port_evenly_and_their_metrics(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str
) -> None:
    port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        "RAGMON_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGMON_REDIS_URL": redis_url,
        "RAGMON_API_METRICS_PORT": str(metrics_port),
        "RAGMON_KAFKA_TOPIC_PREFIX": topic_prefix,
        "RAGMON_DEV_API_KEY": "k",
        "RAGMON_DEV_TENANT": "acme",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.cli",
            "api",
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        env=env,
    )
    conns: list[socket.socket] = []
    try:
        wait_for_port("127.0.0.1", port, 60, proc)
        deadline = time.monotonic() + 60
        while not _ready(None, f"http://127.0.0.1:{port}/readyz"):
            assert time.monotonic() < deadline, "API processes never became ready"
            time.sleep(0.2)
        children = _wait_children(proc, 2)
        assert len(children) == 2, children
        # Four keep-alive connections opened in a burst, as a load balancer or a few app replicas
        # would: dealt out in turn, two per process (a hash over addresses splits them 3:1 or 4:0
        # more often than not).
        conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        sent = 0
        for round_ in range(5):
            for k, conn in enumerate(conns):
                status = _post(conn, port, orjson.dumps({"events": [_trace(round_ * 10 + k)]}))
                assert status == 202
                sent += 1
        served_by: Counter[int] = Counter()
        inodes = {child: _socket_inodes(child) for child in children}
        for conn in conns:
            inode = _server_side_inode(port, conn.getsockname()[1])
            owners = [child for child, held in inodes.items() if inode in held]
            assert len(owners) == 1, (inode, owners)
            served_by[owners[0]] += 1
        assert sorted(served_by.values()) == [2, 2], served_by
        assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 404  # its own port, below
        text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
        accepted = [ln for ln in text.splitlines() if ln.startswith("ragmon_api_events_accepted_total{")]
        assert accepted and float(accepted[0].rsplit(" ", 1)[1]) == sent, accepted
        assert "ragmon_api_broker_up 1.0" in text
    finally:
        for conn in conns:
            conn.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_a_dead_api_process_gets_no_more_connections(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "RAGMON_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGMON_REDIS_URL": redis_url,
        "RAGMON_API_METRICS_PORT": "0",
        "RAGMON_KAFKA_TOPIC_PREFIX": topic_prefix,
        "RAGMON_DEV_API_KEY": "k",
        "RAGMON_DEV_TENANT": "acme",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.cli",
            "api",
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        env=env,
    )
    try:
        wait_for_port("127.0.0.1", port, 60, proc)
        children = _wait_children(proc, 2)
        assert len(children) == 2, children
        # One process dies: the parent stops handing it connections, the other serves them all.
        os.kill(children[0], signal.SIGKILL)
        for i in range(6):
            deadline = time.monotonic() + 30
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
                while not _ready(c, "/readyz"):  # the survivor may still be starting
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
                r = c.post(
                    "/v1/events", json={"events": [_trace(100 + i)]}, headers={"Authorization": "Bearer k"}
                )
            assert r.status_code == 202, r.text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)  # the parent stops its children before it exits
        code = proc.wait(30)
    assert code == 128 + signal.SIGKILL  # the parent reports the crash once it stops
