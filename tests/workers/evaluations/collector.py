"""A real OTLP/HTTP logs endpoint on 127.0.0.1 for the evaluation exporter's tests (tests/support/otlp_collector.py)."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from tests.support.otlp_collector import OtlpCollector


class Collector(OtlpCollector[ExportLogsServiceRequest]):
    def __init__(self) -> None:
        super().__init__("/v1/logs", ExportLogsServiceRequest.FromString)

    def records(self) -> list[tuple[dict[str, Any], LogRecord]]:
        """(resource attributes, record) of every accepted record, in order."""
        return [
            (attributes(rl.resource.attributes), r)
            for _, req in self.requests
            for rl in req.resource_logs
            for sl in rl.scope_logs
            for r in sl.log_records
        ]


def _plain(v: AnyValue) -> Any:
    return getattr(v, v.WhichOneof("value"))


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _plain(kv.value) for kv in kvs}
