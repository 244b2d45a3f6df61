"""Metrics every worker exports about its own consumption."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.runtime.families import Families

_BATCH_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_DELAY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900)


class RuntimeMetrics:
    def __init__(self, registry: CollectorRegistry, worker: str) -> None:
        self.worker = worker
        f = Families(registry, ["worker"])
        self.events = f.counter(
            "ragmon_worker_events_total",
            "Records handled, by event type and outcome (processed, duplicate, dead_letter)",
            ["worker", "type", "outcome"],
        )
        self.dead_letters = f.counter(
            "ragmon_worker_dead_letters_total",
            "Records sent to the dead-letter topic, by reason",
            ["worker", "reason"],
        )
        self.dedupe_hits = f.counter(
            "ragmon_worker_dedupe_hits_total", "Records skipped because their event id was already done"
        )
        self.retries = f.counter(
            "ragmon_worker_retries_total",
            "Batches, periodic work (tick) and readiness checks that failed on an outage and were retried",
            ["worker", "error"],
        )
        self.batch_seconds = f.histogram(
            "ragmon_worker_batch_duration_seconds",
            "Time to process and commit one batch",
            buckets=_BATCH_BUCKETS,
        )
        self.delay_seconds = f.histogram(
            "ragmon_worker_ingest_to_commit_duration_seconds",
            "From the API receiving an event to its offset being committed",
            buckets=_DELAY_BUCKETS,
        )
        self.lag = f.gauge(
            "ragmon_worker_consumer_lag_messages",
            "Records behind the end of each assigned partition",
            ["worker", "topic", "partition"],
        )
        self.ready = f.gauge("ragmon_worker_ready", "1 when the worker consumes; 0 when not ready or halted")
        self.halted = f.gauge(
            "ragmon_worker_halted",
            "1 when the worker stopped consuming on a guard, by reason",
            ["worker", "reason"],
        )
        self.last_commit = f.gauge(
            "ragmon_worker_last_commit_timestamp_seconds", "Unix time of the last commit"
        )
        self.assigned = f.gauge("ragmon_worker_assigned_partitions", "Partitions assigned to this process")
