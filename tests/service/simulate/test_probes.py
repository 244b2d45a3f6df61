"""The simulator's probe replays (scenario `probes`): valid probe traces on a schedule, the same ids while
the version stands, other neighbours after a migration; through the probes worker on real PostgreSQL the
declared migration keeps its overlap and the undeclared one drops it below the alert's floor."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from service.contracts import Topics, TraceBody, reviewdb
from service.contracts.fast import check_body
from service.contracts.stored import stored_document
from service.probes.store import add_probes, parse_probe
from service.simulate import generate_events, load_scenario
from service.simulate.records import ProbeFacts, rfc3339
from service.simulate.stream import EventStream
from tests.support.records import FakeRecord
from workers.probes.config import ProbesConfig
from workers.probes.metrics import ProbesMetrics
from workers.probes.processor import ProbesProcessor
from workers.probes.store import ProbeStore
from workers.probes.views import VIEWS
from workers.runtime.decode import RecordDecoder

START = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _events() -> list[Any]:
    return list(generate_events(load_scenario("probes"), START))


def test_replays_are_valid_probe_traces_stable_until_the_migration() -> None:
    events = _events()
    probes = [e for e in events if isinstance(e.facts, ProbeFacts)]
    assert len(probes) == 2 * 20 * 10  # two tenants, 20 probes, a replay every 60 s of 600 s
    for e in probes[:50]:
        assert check_body("trace", e.body) and TraceBody.model_validate(e.body).probe is not None
    by: dict[tuple[str, str], dict[float, Any]] = defaultdict(dict)
    for e in probes:
        by[(e.tenant, e.facts.query_id)][e.at_s] = e.facts
    for replays in by.values():
        before = [f for at, f in replays.items() if at < 300]
        after = [f for at, f in replays.items() if at >= 300]
        assert all(f.retrieved_ids == before[0].retrieved_ids for f in before)
        assert all(f.retrieved_ids == after[0].retrieved_ids for f in after)
        assert {f.embedding_model for f in after} == {"app-embed-v2"}
        assert {f.index_version for f in before} == {"idx-1"} != {f.index_version for f in after}
    releases = [(e.tenant, e.body["release"], e.at_s) for e in events if e.type == "release"]
    assert ("acme", "v2", 300.0) in releases and not any(t == "globex" and r == "v2" for t, r, _ in releases)
    # the probe set is replayed only while the scenario asks for it: production traces carry no mark
    assert not any(
        "probe" in e.body for e in events if e.type == "trace" and not isinstance(e.facts, ProbeFacts)
    )


@pytest.mark.slow
def test_through_the_probes_worker_the_undeclared_migration_drops(review_db_url: str) -> None:
    scenario = load_scenario("probes")
    stream = EventStream(scenario, START)
    with reviewdb.connect(review_db_url) as conn:
        reviewdb.migrate(conn)
        for tenant, probes in stream.probes.items():
            add_probes(conn, tenant, [parse_probe(i, p.line("core")) for i, p in enumerate(probes, 1)])
    registry = CollectorRegistry()
    proc = ProbesProcessor(
        ProbesConfig(), ProbesMetrics(registry), ProbeStore(review_db_url, 600), Topics("t")
    )
    assert proc.readiness().ready
    releases = RecordDecoder(VIEWS)
    batch = []
    for e in stream:
        if not isinstance(e.facts, ProbeFacts) and e.type != "release":
            continue
        doc = stored_document(e.id, e.type, e.tenant, rfc3339(START, e.at_s), rfc3339(START, e.at_s), e.body)
        record = FakeRecord(
            orjson.dumps(doc), [], "t.probes" if e.type == "trace" else "t.releases", 0, len(batch)
        )
        sub = proc.subscriptions[0]
        batch.append(sub.decode(record) if e.type == "trace" else releases.decode(record, "release"))
        if len(batch) >= 40:
            assert proc.process(batch) == []
            batch = []
    assert proc.process(batch) == []

    def value(name: str, tenant: str) -> Any:
        labels = {"tenant": tenant, "probe_set": "core", "embedding_model": "app-embed-v2"}
        found = [
            s.value
            for m in registry.collect()
            for s in m.samples
            if s.name == name and labels.items() <= s.labels.items()
        ]
        return found[0] if found else None

    assert value("ragmon_rag_probe_overlap_ratio", "acme") == 1.0  # declared: its own baseline
    undeclared = value("ragmon_rag_probe_overlap_ratio", "globex")
    assert undeclared is not None and undeclared < 0.7  # the alert's default floor
    assert value("ragmon_rag_probe_compared_queries", "globex") == 20
    for tenant in ("acme", "globex"):  # the migration keeps the gold near the top: only the neighbours moved
        assert value("ragmon_rag_probe_gold_recall_ratio", tenant) >= 0.7
    proc.close()
