"""Kafka topic names, record keys and header names shared by the API and the workers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, overload

from service.contracts.vocabulary import DEFAULT_VARIANT

# Record headers. Everything a consumer needs to route or dead-letter a record
# without decoding its value travels here.
H_EVENT_ID = "ragmon-event-id"
H_EVENT_TYPE = "ragmon-event-type"
H_TENANT = "ragmon-tenant"
H_SCHEMA = "ragmon-schema"
H_DLQ_REASON = "ragmon-dlq-reason"
H_DLQ_DETAIL = "ragmon-dlq-detail"
H_DLQ_TOPIC = "ragmon-dlq-source-topic"
H_DLQ_PARTITION = "ragmon-dlq-source-partition"
H_DLQ_OFFSET = "ragmon-dlq-source-offset"
H_DLQ_WORKER = "ragmon-dlq-worker"


class _Topic:
    """A topic of Topics, named after the attribute: `Topics(prefix).<name>` is "<prefix>.<name>"."""

    def __init__(self, doc: str | None = None) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, topics: None, owner: type) -> _Topic: ...
    @overload
    def __get__(self, topics: Topics, owner: type | None = None) -> str: ...
    def __get__(self, topics: Topics | None, owner: type | None = None) -> str | _Topic:
        if topics is None:  # on the class (help(), introspection): the descriptor itself
            return self
        return f"{topics.prefix}.{self.name}"


@dataclass(frozen=True)
class Topics:
    """Topic names under one prefix: one topic per event type, plus dead letters, scores and raw spans."""

    prefix: str = "ragmon"

    traces = _Topic()
    feedback = _Topic()
    releases = _Topic()
    labels = _Topic()
    dlq = _Topic()
    scores = _Topic()
    spans = _Topic("Raw OTLP spans, one record per trace per export (service/contracts/spans.py).")
    logs = _Topic(
        "Raw OTLP log records (POST /v1/logs), one record per trace per export (service/contracts/logs.py)."
    )
    probes = _Topic(
        "Trace events marked as probe replays (docs/probes.md): no production worker reads this topic."
    )

    def for_event(self, event_type: str) -> str:
        return {
            "trace": self.traces,
            "feedback": self.feedback,
            "release": self.releases,
            "label": self.labels,
            "score": self.scores,  # score events (service/contracts/scores.py), for consumers of scores
        }[event_type]

    def all(self) -> list[str]:
        return [
            self.traces,
            self.feedback,
            self.releases,
            self.labels,
            self.dlq,
            self.scores,
            self.spans,
            self.logs,
            self.probes,
        ]


def record_key(event_type: str, tenant: str, body: dict[str, Any]) -> bytes:
    """Partition key: everything about one request lands on one partition.

    Traces are keyed by request id, so a production trace and its shadow twins
    are consumed by the same worker in order. Feedback and labels only know the
    trace id, so they are keyed by it (their join with the trace goes through
    Redis and does not depend on co-partitioning). Releases are keyed by
    variant so markers of one variant stay ordered.
    """
    return f"{tenant}/{key_part(event_type, body)}".encode()


def key_part(event_type: str, body: Any) -> str:
    """record_key's part after the tenant, of a body as parsed JSON or as a struct decoded from it
    (the API's fast structs), whose fields are attributes."""
    if isinstance(body, dict):
        if event_type == "trace":
            return body["request_id"]
        if event_type in ("feedback", "label"):
            return body["trace_id"]
        return body.get("variant", DEFAULT_VARIANT)
    if event_type == "trace":
        return body.request_id
    if event_type in ("feedback", "label"):
        return body.trace_id
    return body.variant
