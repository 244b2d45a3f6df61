"""End to end: the simulator's "answers stop using the context" incident through Kafka into a real
faithfulness worker process (`python -m workers.faithfulness`) running the tiny checkpoint.

The tiny model's weights are random, so its scores mean nothing: with the
threshold at 1.0 every scored trace is below it, and what is asserted is the
plumbing and the accounting against the simulator's truth - every trace
counted once, refusals as no_claims, the deterministic sample (production and
shadow twins together), the below-threshold counter moving by exactly the
traces scored in the incident phase, and one score record per sampled trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
import redis
import yaml

from service.contracts import Topics
from service.simulate.records import SimEvent, TraceFacts
from service.simulate.scenario import parse_scenario
from service.simulate.stream import generate_events
from tests.conftest import LOG_DIR
from tests.support.kafka import RecordWriter, read_all, wait_until
from tests.support.simulated import stored_record
from tests.support.workers import WorkerProcess, wait_ready, worker_env
from tests.workers.faithfulness.hhem_builder import TinyHHEM
from workers.faithfulness.sampling import sampled

pytestmark = pytest.mark.slow
SAMPLE_RATE = 0.5
SCENARIO = {
    "name": "faithfulness-incident",
    "seed": 5,
    "duration_s": 120,
    "rate": 2,
    "tenants": ["acme", "globex"],
    "candidate": {"name": "rerank-v2", "share": 0.5},
    "sampling": {"embedding": 0.0, "exclusion_sample": 0.0, "label": 0.0},
    "incidents": [
        {"kind": "unfaithful_answers", "name": "ignores-context", "share": 1.0, "start_s": 60, "end_s": 120}
    ],
}
PHASES = ("clean", "ignores-context")


@pytest.fixture
def worker(
    tiny_hhem: TinyHHEM,
    kafka_bootstrap: str,
    redis_url: str,
    redis_client: redis.Redis,
    topic_prefix: str,
    tmp_path: Path,
) -> Iterator[WorkerProcess]:
    config = tmp_path / "ragmon.yaml"
    section = {
        "model": str(tiny_hhem.model_dir),
        "sample_rate": SAMPLE_RATE,
        "threshold": 1.0,
        "pairs_per_second": 1000,
    }
    config.write_text(yaml.safe_dump({"faithfulness": section}))
    env = worker_env(kafka_bootstrap, redis_url, topic_prefix, config)
    process = WorkerProcess("workers.faithfulness", env, LOG_DIR / f"faithfulness-e2e-{topic_prefix}.log")
    yield process
    process.stop()


def traces_by_phase(anchor: datetime) -> dict[str, list[SimEvent]]:
    out: dict[str, list[SimEvent]] = {phase: [] for phase in PHASES}
    for sim in generate_events(parse_scenario(SCENARIO), anchor):
        if isinstance(sim.facts, TraceFacts):
            out[sim.facts.phase].append(sim)
    return out


def truth(traces: list[SimEvent]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for sim in traces:
        facts = sim.facts
        assert isinstance(facts, TraceFacts)
        counts["traces"] += 1
        is_sampled = sampled(facts.tenant, facts.request_id, SAMPLE_RATE)
        if facts.refused:
            counts["no_claims"] += 1
            counts["records"] += is_sampled
        elif not sim.body["retrieval"]["documents"]:
            counts["no_context"] += 1
        elif is_sampled:
            counts["scored"] += 1
            counts["records"] += 1
        else:
            counts["sampled_out"] += 1
    return counts


def observed(worker: WorkerProcess) -> Counter[str]:
    samples = worker.scrape()

    def total(name: str, **labels: str) -> int:
        want = set(labels.items())
        return int(
            sum(v for (n, ls), v in samples.items() if n == f"ragmon_faithfulness_{name}" and want <= set(ls))
        )

    return Counter(
        {
            "traces": total("traces_total"),
            "no_claims": total("no_claims_total", reason="refused"),
            "no_context": total("skipped_total", reason="no_context"),
            "sampled_out": total("skipped_total", reason="sampled_out"),
            "scored": total("scored_total"),
            "below": total("below_threshold_total"),
        }
    )


def test_the_incident_moves_the_below_threshold_counter_through_kafka(
    worker: WorkerProcess, kafka_bootstrap: str, topic_prefix: str
) -> None:
    wait_ready(worker, timeout_s=90)
    anchor = datetime.now(UTC).replace(microsecond=0)
    phases = traces_by_phase(anchor)
    topics = Topics(topic_prefix)
    writer = RecordWriter(kafka_bootstrap, topics)
    seen: list[Counter[str]] = []
    try:
        for phase in PHASES:
            for sim in phases[phase]:
                writer.send_event(stored_record(sim, anchor))
            writer.flush()
            done = seen[-1]["traces"] if seen else 0
            wait_until(lambda: observed(worker)["traces"] >= done + len(phases[phase]), 90, what=phase)  # noqa: B023
            seen.append(observed(worker))
    finally:
        writer.close()
    clean, after = seen
    incident = after - clean
    for counts, phase in ((clean, "clean"), (incident, "ignores-context")):
        expected = truth(phases[phase])
        assert {k: counts[k] for k in ("traces", "no_claims", "no_context", "sampled_out", "scored")} == {
            k: expected[k] for k in ("traces", "no_claims", "no_context", "sampled_out", "scored")
        }, phase
        assert counts["below"] == counts["scored"] > 0, phase
    records = read_all(kafka_bootstrap, topics.scores)
    events = [orjson.loads(r.value) for r in records]
    assert len(events) == truth(phases["clean"])["records"] + truth(phases["ignores-context"])["records"]
    assert all(
        r.key == f"{e['tenant']}/{e['request_id']}".encode() for r, e in zip(records, events, strict=True)
    )
    # Twins travel together: a sampled request has a record for every variant that served it.
    served = {(s.facts.tenant, s.facts.request_id, s.facts.variant) for p in PHASES for s in phases[p]}  # type: ignore[union-attr]
    recorded = {(e["tenant"], e["request_id"], e["variant"]) for e in events}
    requests = {(t, r) for t, r, _ in recorded}
    assert recorded == {key for key in served if key[:2] in requests}
    assert {e["variant"] for e in events} == {"production", "rerank-v2"}
    assert worker.terminate() == 0
