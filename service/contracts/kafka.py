"""Creating ragmon's topics (used by the API at start and by every worker)."""

from __future__ import annotations

import contextlib

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from service.contracts import vocabulary as L
from service.contracts.settings import CommonSettings

# max.message.bytes of every ragmon topic: one record of MAX_RECORD_BYTES (the API refuses bigger
# ones before producing) in a batch of its own, with room for the batch and record overheads. A stock
# Apache Kafka's default (message.max.bytes, 1 MB) is a little less; the topic's own setting wins.
TOPIC_MAX_MESSAGE_BYTES = L.MAX_RECORD_BYTES + 64 * 1024
TOPIC_CONFIGS = {"max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES)}


def ensure_topics(settings: CommonSettings, timeout_s: float = 10.0) -> list[str]:
    """Create every ragmon topic that is missing, with the configured partitions; return those created."""
    admin = KafkaAdminClient(
        bootstrap_servers=settings.bootstrap_list,
        request_timeout_ms=int(timeout_s * 1000),
        client_id="ragmon-admin",
    )
    try:
        existing = set(admin.list_topics())
        missing = [
            NewTopic(t, settings.kafka_partitions, 1, topic_configs=TOPIC_CONFIGS)
            for t in settings.topics.all()
            if t not in existing
        ]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics(missing, timeout_ms=int(timeout_s * 1000))
        return [t.name for t in missing]
    finally:
        admin.close()
