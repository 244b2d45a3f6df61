"""The shadow worker's Redis work on a Redis Cluster node: every script call, transaction and multi-key
command touches keys of one hash slot (docs/shadow.md, "Pairing").

A one-node cluster (all 16,384 slots on one redis-server) refuses what a real cluster would: a script
declared with `#!lua` that touches keys of two slots, a transaction across slots. Two tenants' events are
interleaved in one batch, so a call spanning tenants would fail here.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.local.embedded import ChildProcess, free_port, redis_server_binary, wait_for_port
from tests.workers.shadow.shadow_events import score_event, trace_body, trace_event
from workers.shadow.config import ShadowConfig
from workers.shadow.live import live_comparison
from workers.shadow.metrics import ShadowMetrics
from workers.shadow.processor import ShadowProcessor
from workers.shadow.store import ShadowStore


@pytest.fixture
def cluster_node(tmp_path: Path) -> Iterator[redis.Redis]:
    port = free_port()
    proc = subprocess.Popen(
        [
            redis_server_binary(),
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            str(free_port()),
            "--cluster-config-file",
            str(tmp_path / "nodes.conf"),
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    child = ChildProcess("redis-cluster", proc, port)
    try:
        wait_for_port("127.0.0.1", port, 15, proc)
        client = redis.Redis(port=port)
        client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        deadline = time.monotonic() + 20
        while b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
            assert time.monotonic() < deadline, "the one-node cluster did not come up"
            time.sleep(0.1)
        yield client
        client.close()
    finally:
        child.stop()


@pytest.mark.slow
def test_the_node_refuses_a_script_across_slots(cluster_node: redis.Redis) -> None:
    """The check below can fail: a script touching two tenants' keys is refused."""
    script = (
        "#!lua\nredis.call('SET', KEYS[1], 1)\nredis.call('SET', 'ragmon:shadow:{globex}:seen', 1)\nreturn 1"
    )
    with pytest.raises(redis.exceptions.ResponseError, match="same slot"):
        cluster_node.eval(script, 1, "ragmon:shadow:{acme}:seen")


@pytest.mark.slow
def test_pairing_and_recompute_keep_to_one_slot_per_call(cluster_node: redis.Redis) -> None:
    config = ShadowConfig(recompute_every_pairs=5, min_pairs=5, resamples=200)
    proc = ShadowProcessor(config, ShadowStore(cluster_node, config), ShadowMetrics(CollectorRegistry()))
    batch = []
    for i in range(12):
        for tenant in ("acme", "globex"):
            batch += [
                trace_event(trace_body(f"r{i}", "cand-a"), tenant=tenant),
                trace_event(trace_body(f"r{i}"), tenant=tenant),
                score_event(f"r{i}", "production", 0.8, tenant=tenant),
                score_event(f"r{i}", "cand-a", 0.6, tenant=tenant),
            ]
    assert proc.process(batch) == []
    assert proc.process(batch) == []  # redelivered: no-ops, still one slot per call
    for tenant in ("acme", "globex"):
        counts = proc.store.counts(tenant)
        assert counts.paired == {"cand-a": 12} and counts.seen == {"production": 12, "cand-a": 12}
    assert proc.store.candidates() == [("acme", "cand-a"), ("globex", "cand-a")]
    proc.tick(time.time())  # lease, window, result, mark_recomputed: all on the node
    for tenant in ("acme", "globex"):
        comparison, pairs = live_comparison(proc.store, config, tenant, "cand-a")
        assert pairs == 12
        faithful = next(m for m in comparison.metrics if m.metric == "faithfulness_score")
        assert faithful.n == 12 and faithful.delta == pytest.approx(-0.2)
        assert cluster_node.get(f"ragmon:shadow:{{{tenant}}}:result:cand-a") is not None
