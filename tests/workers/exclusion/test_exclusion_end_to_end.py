"""End to end: the simulator's filter regression through Kafka into a real exclusion worker process.

Records go to the topics as the API writes them (traces and labels on their
own partitions, so labels are often consumed before their trace); the
worker runs as `python -m workers.exclusion` and is read back over /metrics,
first after the clean phases (the baseline), then after the incident.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
import yaml

from service.contracts import Topics
from tests.conftest import LOG_DIR
from tests.support.kafka import RecordWriter, wait_until
from tests.support.simulated import stored_record
from tests.support.workers import WorkerProcess, wait_ready, worker_env
from tests.workers.exclusion.exclusion_sim import (
    WORKER_CONFIG,
    Samples,
    attributions,
    generate,
    phase_of,
    production_rate,
    truth_counts,
    worker_counts,
)

pytestmark = pytest.mark.slow
BASELINE_PHASES = ("clean", "leak")
INCIDENT_PHASE = "filter-regression"


@pytest.fixture
def worker(
    kafka_bootstrap: str, redis_url: str, redis_client: redis.Redis, topic_prefix: str, tmp_path: Path
) -> Iterator[WorkerProcess]:
    config = tmp_path / "ragmon.yaml"
    config.write_text(yaml.safe_dump({"exclusion": WORKER_CONFIG}))
    env = worker_env(kafka_bootstrap, redis_url, topic_prefix, config)
    process = WorkerProcess("workers.exclusion", env, LOG_DIR / f"exclusion-e2e-{topic_prefix}.log")
    yield process
    process.stop()


def without_empty(counts: dict[tuple[str, ...], tuple[int, ...]]) -> dict[tuple[str, ...], tuple[int, ...]]:
    return {k: v for k, v in counts.items() if any(v)}


def minus(after: Samples, before: Samples) -> Samples:
    return {key: value - before.get(key, 0.0) for key, value in after.items()}


def test_worker_measures_the_incident_from_kafka(
    worker: WorkerProcess, kafka_bootstrap: str, topic_prefix: str
) -> None:
    wait_ready(worker)
    anchor = datetime.now(UTC).replace(microsecond=0)
    events, manifest = generate(anchor)
    writer = RecordWriter(kafka_bootstrap, Topics(topic_prefix))
    scraped: list[Samples] = []
    try:
        for phases in (BASELINE_PHASES, (INCIDENT_PHASE,)):
            for sim in events:
                if phase_of(sim) in phases:
                    writer.send_event(stored_record(sim, anchor))
            writer.flush()
            expected = sum(counts[0] for counts in truth_counts(manifest, phases).values())
            done = sum(counts[0] for counts in worker_counts(scraped[-1]).values()) if scraped else 0
            wait_until(
                lambda: worker.total("ragmon_exclusion_samples_total") >= done + expected,  # noqa: B023
                timeout_s=90,
                what=f"{expected} evaluations of {phases}",
            )
            scraped.append(worker.scrape())
    finally:
        writer.close()
    baseline, after = scraped
    incident = minus(after, baseline)
    assert worker_counts(baseline) == truth_counts(manifest, BASELINE_PHASES)
    assert without_empty(worker_counts(incident)) == truth_counts(manifest, [INCIDENT_PHASE])
    assert production_rate(baseline) < 0.15 and production_rate(incident) > 0.9
    assert attributions(incident, "proxy").most_common(1)[0][0] == "locale"
    assert worker.terminate() == 0  # SIGTERM: finish the batch, commit, exit 0
