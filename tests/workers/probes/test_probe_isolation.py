"""Probe traces never reach a production worker: the API sends every trace with a probe mark to the probes
topic (tests/service/api/test_plain_batch.py), and no worker but `probes` reads that topic, nor does `probes`
read the traces topic. Checked for every worker on disk, so a new worker is checked too."""

from __future__ import annotations

import pytest

from service.contracts import Topics
from tests.docs import codescan, registry
from workers.probes.config import ProbesConfig
from workers.probes.metrics import ProbesMetrics
from workers.probes.processor import ProbesProcessor
from workers.probes.store import ProbeStore

WORKERS = sorted(registry.specs())


@pytest.mark.parametrize("worker", WORKERS)
def test_no_production_worker_reads_the_probes_topic(worker: str) -> None:
    consumed, produced = codescan.worker_topics()[worker]
    if worker == "probes":
        assert consumed == {"probes", "releases"}
        assert "traces" not in consumed
    else:
        assert "probes" not in consumed, f"{worker} would count replayed probes in production series"
        assert "probes" not in produced


def test_the_probes_worker_subscribes_to_the_probes_topic_only_for_traces() -> None:
    from prometheus_client import CollectorRegistry

    proc = ProbesProcessor(
        ProbesConfig(),
        ProbesMetrics(CollectorRegistry()),
        ProbeStore("postgresql://unused", 600),
        Topics("x"),
    )
    assert [(s.topic, s.event_type) for s in proc.subscriptions] == [("x.probes", "trace")]
    assert proc.event_types == ("release",)
