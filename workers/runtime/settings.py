"""Settings of a worker process (one class for every worker; env prefix RAGMON_)."""

from __future__ import annotations

import os
import socket

from pydantic import Field

from service.contracts.settings import CommonSettings


class WorkerSettings(CommonSettings):
    worker_metrics_host: str = "127.0.0.1"
    worker_metrics_port: int = Field(0, ge=0, le=65535, description="0 picks a free port (printed at start)")
    worker_group_id: str | None = Field(
        None,
        description="consumer group; default <topic prefix>-<worker name> (ragmon-<worker name> with the default prefix), so two installations sharing a Kafka cluster under different prefixes never share a group",
    )
    worker_instance: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    worker_max_batch: int = Field(500, ge=1, le=10_000)
    worker_poll_timeout_ms: int = Field(500, ge=10, le=10_000)
    worker_max_record_bytes: int = Field(
        1024 * 1024,
        ge=64 * 1024,
        description="the broker's per-record size (Kafka's max.message.bytes); a derived "
        "record over it is dead-lettered with its source (derived_record_too_large), never retried",
    )
    worker_dedupe_ttl_s: int = Field(7 * 24 * 3600, ge=60, description="how long an event id stays 'done'")
    worker_dlq_max_ratio: float = Field(
        0.5, gt=0, le=1, description="halt when dead letters exceed this share"
    )
    worker_dlq_window: int = Field(1000, ge=10, description="messages the dead-letter ratio is measured over")
    worker_dlq_min_messages: int = Field(
        100, ge=1, description="no halt before this many messages in the window"
    )
    worker_retry_initial_s: float = Field(0.2, gt=0)
    worker_retry_max_s: float = Field(10.0, gt=0)
    worker_session_timeout_ms: int = Field(6000, ge=1000)
    worker_heartbeat_interval_ms: int = Field(1000, ge=100)
    worker_max_poll_interval_ms: int = Field(300_000, ge=10_000)
    worker_lag_interval_s: float = Field(5.0, gt=0, description="how often consumer lag is measured")
    worker_shutdown_grace_s: float = Field(
        20.0, gt=0, description="longest wait for the in-flight batch on SIGTERM"
    )

    def group_id(self, worker: str) -> str:
        return self.worker_group_id or f"{self.kafka_topic_prefix}-{worker}"
