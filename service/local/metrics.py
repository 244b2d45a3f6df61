"""Metrics of `ragmon up` itself (the supervisor of the local stack)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class SupervisorMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.restarts = Counter(
            "ragmon_supervisor_restarts_total",
            "Processes ragmon up restarted after they exited",
            ["process"],
            registry=registry,
        )
