"""Two metrics-worker processes in one group over the simulator's traffic, through the real API.

Summed over both processes, the counters equal the simulator's ground truth
(its manifest counts only events the API acknowledged).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from service.simulate.run import run_send
from service.simulate.scenario import load_scenario
from service.simulate.sender import SendConfig
from tests.conftest import LOG_DIR
from tests.service.api.api_harness import ACME_KEY, GLOBEX_KEY, SIMULATOR_KEYS, RunningApi, api_settings
from tests.support.kafka import committed_total, wait_until
from tests.support.workers import WorkerProcess, metric_sum, wait_ready, worker_env

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def api(kafka_bootstrap: str, redis_url: str, topic_prefix: str) -> Iterator[RunningApi]:
    running = RunningApi(
        api_settings(
            kafka_bootstrap,
            redis_url,
            topic_prefix,
            kafka_partitions=4,
            api_keys=SIMULATOR_KEYS,
            max_events_per_batch=1000,
            max_body_bytes=10 * 1024 * 1024,
            max_decompressed_bytes=20 * 1024 * 1024,
        )
    ).start()
    yield running
    running.stop()


def send(api: RunningApi, duration_s: int, seed: int) -> dict[str, Any]:
    scenario = load_scenario("clean").with_overrides(duration_s=duration_s, seed=seed)
    cfg = SendConfig(api=api.url, keys={"acme": ACME_KEY, "globex": GLOBEX_KEY}, fast=True, batch_size=200)
    manifest = run_send(scenario, cfg)
    assert not manifest["events"]["rejected"] and not manifest["events"]["failed"], manifest["events"]
    return manifest


def summed(samples: list[Samples], name: str, *keys: str, **labels: str) -> Counter[tuple[str, ...]]:
    out: Counter[tuple[str, ...]] = Counter()
    for s in samples:
        for (n, ls), v in s.items():
            d = dict(ls)
            if n == name and all(d.get(k) == v2 for k, v2 in labels.items()):
                out[tuple(d[k] for k in keys)] += v
    return out


def consumed(manifest: dict[str, Any]) -> int:
    acc = manifest["events"]["accepted"]
    return acc.get("trace", 0) + acc.get("feedback", 0) + acc.get("release", 0)


def test_two_processes_count_exactly_what_was_sent(
    api: RunningApi,
    kafka_bootstrap: str,
    redis_url: str,
    topic_prefix: str,
    tmp_path: Path,
    workers: list[WorkerProcess],
) -> None:
    config = tmp_path / "ragmon.yaml"
    config.write_text("metrics:\n  park_s: 600\n")
    env = worker_env(kafka_bootstrap, redis_url, topic_prefix, config)
    for i in range(2):
        workers.append(WorkerProcess("workers.metrics", env, LOG_DIR / f"metrics-group-{i}.log"))
    for w in workers:
        wait_ready(w)
    manifest = send(api, duration_s=60, seed=21)
    total = consumed(manifest)
    wait_until(
        lambda: sum(w.total("ragmon_worker_events_total", outcome="processed") for w in workers) == total,
        90,
        what=f"{total} events processed by the group",
    )
    samples = [w.scrape() for w in workers]
    assert all(metric_sum(s, "ragmon_worker_events_total") > 0 for s in samples), "both members did work"

    queries = summed(samples, "ragmon_rag_queries_total", "tenant", "variant", "intent")
    expected = Counter(
        {(r["tenant"], r["variant"], r["intent"]): r["count"] for r in manifest["traces"]["rows"]}
    )
    assert queries == expected
    assert sum(summed(samples, "ragmon_rag_refusals_total").values()) == manifest["traces"]["refused"]
    # The simulator counts refusals among answers without citations; ragmon counts them apart.
    uncited = sum(summed(samples, "ragmon_rag_uncited_answers_total").values())
    assert uncited == manifest["traces"]["without_citations"] - manifest["traces"]["refused"]
    tokens = summed(samples, "ragmon_rag_tokens_total", "kind")
    assert {k[0]: v for k, v in tokens.items()} == manifest["traces"]["usage"]["tokens"]
    reported = summed(samples, "ragmon_rag_cost_per_query_usd_sum", source="reported")
    assert sum(reported.values()) == pytest.approx(manifest["traces"]["usage"]["cost_usd_reported"])

    feedback = summed(
        samples, "ragmon_feedback_total", "tenant", "variant", "release", "intent", "kind", "reason"
    )
    expected_fb = Counter(
        {
            (r["tenant"], r["variant"], r["release"], r["intent"], r["kind"], r["reason"]): r["count"]
            for r in manifest["feedback"]["rows"]
            if r["trace_accepted"]
        }
    )
    assert feedback == expected_fb, "every feedback joined to its trace's variant, release and intent"
    assert manifest["feedback"]["before_trace"] > 0, "the run had feedback that arrived before its trace"


def test_kill_minus_nine_accounts_for_every_event(
    api: RunningApi,
    kafka_bootstrap: str,
    redis_url: str,
    redis_client: redis.Redis,
    topic_prefix: str,
    tmp_path: Path,
    workers: list[WorkerProcess],
) -> None:
    """A crash: B takes over A's partitions, nothing is lost, and the counter error is bounded.

    What kill -9 can do to in-process counters: A's counts die with A except what
    Prometheus scraped (here: our last scrape of A, every 0.2 s). Records A
    processed but had not committed are redelivered to B and counted again
    (at most one batch per partition A held); records A counted after our last
    scrape and committed are counted nowhere. So the total over B plus A's last
    scrape is within [N - lost, N + redelivered], both bounded by what A did in
    its last moments; the done-keys in Redis (effects kept outside the process)
    are exact: every event id exactly once.
    """
    config = tmp_path / "ragmon.yaml"
    config.write_text("metrics:\n  park_s: 600\n")
    env = worker_env(kafka_bootstrap, redis_url, topic_prefix, config, RAGMON_WORKER_MAX_BATCH="50")
    workers.append(a := WorkerProcess("workers.metrics", env, LOG_DIR / "metrics-crash-a.log"))
    workers.append(b := WorkerProcess("workers.metrics", env, LOG_DIR / "metrics-crash-b.log"))
    wait_ready(a)
    wait_ready(b)
    manifest = send(api, duration_s=90, seed=22)
    total = consumed(manifest)
    wait_until(lambda: a.total("ragmon_worker_events_total", outcome="processed") >= 200, 60, what="A busy")
    a_last = a.total("ragmon_worker_events_total", outcome="processed")
    a.kill9()

    def done_keys() -> int:
        return sum(1 for _ in redis_client.scan_iter("ragmon:done:metrics:*", count=1000))

    wait_until(lambda: done_keys() == total, 90, what="every event id done")
    for topic in (api.topics.traces, api.topics.feedback, api.topics.releases):
        wait_until(
            lambda t=topic: len(set(committed_total(kafka_bootstrap, f"{topic_prefix}-metrics", t))) == 1,
            30,
            what=f"{topic} fully committed",
        )
    b_processed = b.total("ragmon_worker_events_total", outcome="processed")
    b_dupes = b.total("ragmon_worker_dedupe_hits_total")
    in_flight_bound = 50 * 4  # one batch per partition A could have held
    assert total - in_flight_bound <= a_last + b_processed <= total + in_flight_bound
    assert b_dupes <= in_flight_bound
