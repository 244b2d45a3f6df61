"""OpenTelemetry for ragmon's own work.

Spans are always created (so the W3C trace context reaches Kafka headers and
the workers can continue the trace); they are exported only when the standard
OTEL_* variables ask for it: OTEL_TRACES_EXPORTER=otlp|console|none, or an
OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT. The OTLP exporter itself reads the
endpoint, headers and timeouts from those variables; OTEL_SERVICE_NAME and
OTEL_RESOURCE_ATTRIBUTES name the resource.
"""

from __future__ import annotations

import os

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

_configured = False


def _exporter_choice() -> str:
    explicit = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if explicit:
        return explicit
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return "otlp"
    return "none"


def setup_tracing(default_service_name: str) -> TracerProvider:
    """Install the global tracer provider once per process."""
    global _configured
    provider = trace.get_tracer_provider()
    if _configured and isinstance(provider, TracerProvider):
        return provider
    attrs = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": default_service_name}
    provider = TracerProvider(resource=Resource.create(attrs))
    choice = _exporter_choice()
    if choice == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif choice == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured = True
    return provider


def current_traceparent() -> bytes | None:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    value = carrier.get("traceparent")
    return value.encode() if value else None


def extract_context(headers: dict[str, str] | list[tuple[str, bytes]] | None) -> Context:
    """The parent context from HTTP headers or Kafka record headers."""
    if headers is None:
        return propagate.extract({})
    if isinstance(headers, list):
        carrier = {k: v.decode("latin-1") for k, v in headers if k in ("traceparent", "tracestate")}
    else:
        carrier = {k.lower(): v for k, v in headers.items()}
    return propagate.extract(carrier)
