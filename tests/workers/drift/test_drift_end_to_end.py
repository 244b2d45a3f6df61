"""End to end: the simulator's topic-shift incident through Kafka into a real drift worker process.

Trace records go to the topic as the API writes them; the worker runs as
`python -m workers.drift` with the pinned encoder (real query texts) and the
app's own embeddings (the simulator's encoder) and is read back over
/metrics: first after the clean phase (no drift flag on either signal), then
after the shift (the flag is up on both).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
import yaml

from service.contracts import Topics
from service.simulate import generate_events, parse_scenario
from service.simulate.records import TraceFacts
from tests.conftest import LOG_DIR
from tests.support.kafka import RecordWriter, wait_until
from tests.support.simulated import stored_record
from tests.support.workers import WorkerProcess, wait_ready, worker_env

pytestmark = pytest.mark.slow
WINDOW = 50
SIGNALS = ("encoder", "app")
WORKER_CONFIG = {
    "app_embeddings": {"models": ["app-embed-v1"]},
    "reference_size": WINDOW,
    "current_size": WINDOW,
    "min_current_size": WINDOW,
    "test_every_queries": WINDOW,
    "test_every_seconds": 3600,
    # alpha 0.001: the clean phase must not raise the flag, and a full topic change reaches p = 1/2000
    "alpha": 0.001,
    "permutations": 1999,
    "seed": 5,
    "publish_every_s": 0.5,
}


def scenario_traces(anchor: datetime) -> dict[str, list]:  # type: ignore[type-arg]
    scenario = parse_scenario(
        {
            "name": "drift-topic-shift",
            "seed": 21,
            "duration_s": 60,
            "rate": 4,
            "tenants": ["acme"],
            "sampling": {"embedding": 1.0},
            "incidents": [{"kind": "topic_shift", "name": "topic-shift", "share": 1.0, "start_s": 36}],
        }
    )
    phases: dict[str, list] = {"clean": [], "topic-shift": []}  # type: ignore[type-arg]
    for sim in generate_events(scenario, anchor):
        if sim.type == "trace" and isinstance(sim.facts, TraceFacts):
            phases[sim.facts.phase].append(sim)
    return phases


@pytest.fixture
def worker(
    kafka_bootstrap: str, redis_url: str, redis_client: redis.Redis, topic_prefix: str, tmp_path: Path
) -> Iterator[WorkerProcess]:
    config = tmp_path / "ragmon.yaml"
    config.write_text(yaml.safe_dump({"drift": WORKER_CONFIG}))
    env = worker_env(kafka_bootstrap, redis_url, topic_prefix, config, HF_HUB_OFFLINE="1")
    process = WorkerProcess("workers.drift", env, LOG_DIR / f"drift-e2e-{topic_prefix}.log")
    yield process
    process.stop()


def embedded(worker: WorkerProcess, signal: str) -> float:
    return sum(
        worker.total("ragmon_drift_embeddings_total", signal=signal, outcome=o)
        for o in ("reference", "current")
    )


def test_the_flag_rises_after_the_topic_shift_and_not_before(
    worker: WorkerProcess, kafka_bootstrap: str, topic_prefix: str
) -> None:
    wait_ready(worker, timeout_s=90)  # the pinned encoder loads in the background first
    anchor = datetime.now(UTC).replace(microsecond=0)
    phases = scenario_traces(anchor)
    # Exactly 2N clean queries (reference + one current window: one test) and N shifted (one more
    # test, on a current window that holds only shifted queries).
    clean, shifted = phases["clean"][: 2 * WINDOW], phases["topic-shift"][:WINDOW]
    assert (len(clean), len(shifted)) == (2 * WINDOW, WINDOW)
    writer = RecordWriter(kafka_bootstrap, Topics(topic_prefix))
    try:
        for sim in clean:
            writer.send_event(stored_record(sim, anchor))
        writer.flush()
        for signal in SIGNALS:
            wait_until(
                lambda s=signal: (
                    embedded(worker, s) == len(clean)  # type: ignore[misc]
                    and worker.total("ragmon_drift_tests_total", signal=s) == 1
                ),
                timeout_s=90,
                what=f"the {signal} signal's clean windows tested",
            )
            assert worker.total("ragmon_drift_detected", signal=signal) == 0, signal
            assert worker.total("ragmon_drift_p_value_ratio", signal=signal) > WORKER_CONFIG["alpha"]
        for sim in shifted:
            writer.send_event(stored_record(sim, anchor))
        writer.flush()
        for signal in SIGNALS:
            wait_until(
                lambda s=signal: (
                    embedded(worker, s) == len(clean) + len(shifted)  # type: ignore[misc]
                    and worker.total("ragmon_drift_tests_total", signal=s) == 2
                ),
                timeout_s=90,
                what=f"the {signal} signal's test after the shift",
            )
            assert worker.total("ragmon_drift_detected", signal=signal) == 1, signal
            assert worker.total("ragmon_drift_p_value_ratio", signal=signal) <= WORKER_CONFIG["alpha"]
    finally:
        writer.close()
    assert worker.total("ragmon_drift_model_resets_total") == 0
    assert worker.terminate() == 0  # SIGTERM: finish the batch, commit, exit 0
