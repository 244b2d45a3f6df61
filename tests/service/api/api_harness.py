"""The real API on a real port, and a reader of what reached Kafka (imported by the API tests).

RunningApi runs create_app(ApiSettings(...)) under uvicorn.Server in a
background thread on a free 127.0.0.1 port (the socket is bound before the
server starts, so no other process can take the port in between); stop() asks
the server to exit and joins its thread.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import orjson
import uvicorn
from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from prometheus_client import CollectorRegistry

from service.api.app import create_app
from service.api.connections import config as api_config
from service.api.settings import ApiKeyEntry, ApiSettings, hash_key
from service.contracts.topics import Topics
from tests.service.api.api_events import ACME_KEY, GLOBEX_KEY, READONLY_KEY

EVENT_TOPICS = ("traces", "feedback", "releases", "labels")


def key_entry(tenant: str, key: str, **kwargs: Any) -> ApiKeyEntry:
    return ApiKeyEntry(tenant=tenant, key_sha256=hash_key(key), **kwargs)


DEFAULT_KEYS = [
    key_entry(
        "acme", ACME_KEY, scopes=["ingest", "label"], name="acme-app"
    ),  # label: it sends label events too
    key_entry("globex", GLOBEX_KEY, name="globex-app"),
    key_entry("acme", READONLY_KEY, scopes=["read"], name="acme-dashboards"),
]

# The simulator sends offline gold labels for both tenants: its keys carry the `label` scope.
SIMULATOR_KEYS = [
    key_entry("acme", ACME_KEY, scopes=["ingest", "label"], name="acme-simulator"),
    key_entry("globex", GLOBEX_KEY, scopes=["ingest", "label"], name="globex-simulator"),
]

# Tighter than production so that "too large" costs kilobytes, not megabytes.
TEST_LIMITS: dict[str, Any] = {
    "max_body_bytes": 256 * 1024,
    "max_decompressed_bytes": 512 * 1024,
    "max_events_per_batch": 50,
}


# The pseudonym key of test APIs: tests compute the pseudonyms they expect with it.
PSEUDONYM_KEY = "test-pseudonym-key-0123456789"


def api_settings(kafka_bootstrap: str, redis_url: str, topic_prefix: str, /, **overrides: Any) -> ApiSettings:
    fields: dict[str, Any] = {
        "kafka_bootstrap_servers": kafka_bootstrap,
        "redis_url": redis_url,
        "kafka_topic_prefix": topic_prefix,
        "kafka_partitions": 2,
        "api_keys": DEFAULT_KEYS,
        "pseudonym_key": PSEUDONYM_KEY,
        "api_metrics_port": 0,  # /metrics on its own port: any free one (RunningApi.scrape reads it)
        **TEST_LIMITS,
    }
    fields.update(overrides)
    return ApiSettings(**fields)


class RunningApi:
    """One API instance: its own app, registry, producer and uvicorn server."""

    def __init__(self, settings: ApiSettings) -> None:
        self.settings = settings
        self.registry = CollectorRegistry()
        self.app = create_app(settings, self.registry)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        config = api_config(
            self.app,
            settings,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )  # the API's own connection limits
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": [self._sock]},
            name=f"ragmon-api-{self.port}",
            daemon=True,
        )
        self.http = httpx.Client(base_url=self.url, timeout=20)

    @property
    def topics(self) -> Topics:
        return self.settings.topics

    def start(self, timeout_s: float = 30) -> RunningApi:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the API server thread exited during startup (see the log above)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API did not start within {timeout_s}s")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.http.close()
        self.server.should_exit = True
        self._thread.join(20)
        self._sock.close()
        assert not self._thread.is_alive(), "the API server thread did not stop"

    def post(
        self,
        events: list[Any] | None = None,
        *,
        body: Any = None,
        content: bytes | None = None,
        key: str | None = ACME_KEY,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """POST /v1/events: `events` wraps a list in the envelope, `body` sends any JSON, `content` raw bytes."""
        if content is None:
            content = orjson.dumps({"events": events} if body is None else body)
        sent = {"Content-Type": "application/json"}
        if key is not None:
            sent["Authorization"] = f"Bearer {key}"
        sent.update(headers or {})
        return self.http.post("/v1/events", content=content, headers=sent)

    @property
    def metrics_url(self) -> str:
        """Where this API serves /metrics (its own port, not the ingestion port)."""
        return f"http://127.0.0.1:{self.app.state.metrics_port}/metrics"

    def scrape(self) -> str:
        return httpx.get(self.metrics_url, timeout=10).text

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        value = self.registry.get_sample_value(name, labels or {})
        return 0.0 if value is None else value


class KafkaReader:
    """Reads a topic from the beginning up to its end offsets at the time of the call."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def _consumer(self) -> KafkaConsumer:
        return KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            client_id="ragmon-test-reader",
            request_timeout_ms=10_000,
        )

    def partitions(self, topic: str) -> set[int]:
        consumer = self._consumer()
        try:
            return set(consumer.partitions_for_topic(topic) or ())
        finally:
            consumer.close()

    def records(self, topic: str, timeout_s: float = 15) -> list[ConsumerRecord]:
        consumer = self._consumer()
        try:
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                return []
            tps = [TopicPartition(topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            end = consumer.end_offsets(tps)
            out: list[ConsumerRecord] = []
            deadline = time.monotonic() + timeout_s
            while any(consumer.position(tp) < end[tp] for tp in tps):
                if time.monotonic() > deadline:
                    at = {tp.partition: consumer.position(tp) for tp in tps}
                    got = [(r.partition, r.offset) for r in out]
                    raise AssertionError(
                        f"could not read {topic} up to {end} within {timeout_s}s: at {at}, got {got}"
                    )
                for batch in consumer.poll(timeout_ms=200).values():
                    out.extend(batch)
            return out
        finally:
            consumer.close()

    def values(self, topic: str) -> list[dict[str, Any]]:
        return [orjson.loads(r.value) for r in self.records(topic)]

    def event_records(self, topics: Topics) -> list[ConsumerRecord]:
        """Every record of the four event topics, the probes topic (traces with a probe mark go there)
        and the dead-letter topic."""
        out: list[ConsumerRecord] = []
        for name in (*EVENT_TOPICS, "probes", "dlq"):
            out.extend(self.records(getattr(topics, name)))
        return out

    def event_ids(self, topics: Topics) -> list[str]:
        return [orjson.loads(r.value)["id"] for r in self.event_records(topics)]
