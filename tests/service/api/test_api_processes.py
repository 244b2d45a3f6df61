"""`ragmon api --workers 2`: two processes on one port, one view of their metrics."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime

import httpx

from service.embedded import free_port, wait_for_port


def test_two_api_processes_share_the_port_and_their_metrics(kafka_bootstrap: str, redis_url: str,
                                                            topic_prefix: str) -> None:
    port = free_port()
    env = {**os.environ, "RAGMON_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "RAGMON_REDIS_URL": redis_url,
           "RAGMON_KAFKA_TOPIC_PREFIX": topic_prefix, "RAGMON_DEV_API_KEY": "k", "RAGMON_DEV_TENANT": "acme"}
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "api", "--port", str(port), "--workers", "2",
                             "--log-level", "warning"], env=env)
    try:
        wait_for_port("127.0.0.1", port, 60, proc)
        now = datetime.now(UTC).isoformat()
        sent = 0
        for i in range(20):  # fresh connections: the kernel spreads them over both processes
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
                events = [{"type": "trace", "id": str(uuid.uuid4()), "timestamp": now,
                           "body": {"trace_id": f"t{i}", "request_id": "r", "query": {"text": "q"}}}]
                r = c.post("/v1/events", json={"events": events}, headers={"Authorization": "Bearer k"})
                sent += r.status_code == 202
        assert sent == 20
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        accepted = [ln for ln in text.splitlines() if ln.startswith("ragmon_api_events_accepted_total{")]
        assert accepted and float(accepted[0].rsplit(" ", 1)[1]) == sent, accepted
        assert "ragmon_api_broker_up 1.0" in text
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
