"""Creating ragmon's topics (used by the API at start and by every worker)."""

from __future__ import annotations

import contextlib

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from service.contracts.settings import CommonSettings


def ensure_topics(settings: CommonSettings, timeout_s: float = 10.0) -> list[str]:
    """Create every ragmon topic that is missing, with the configured partitions; return those created."""
    admin = KafkaAdminClient(
        bootstrap_servers=settings.bootstrap_list,
        request_timeout_ms=int(timeout_s * 1000),
        client_id="ragmon-admin",
    )
    try:
        existing = set(admin.list_topics())
        missing = [NewTopic(t, settings.kafka_partitions, 1) for t in settings.topics.all() if t not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics(missing, timeout_ms=int(timeout_s * 1000))
        return [t.name for t in missing]
    finally:
        admin.close()
