"""`ragmon worker forwarder` / `python -m workers.forwarder`: raw spans -> an OTLP/HTTP collector (Phoenix).

Off unless RAGMON_FORWARD_ENDPOINT is set (`ragmon up` starts it only then); see docs/phoenix.md.
"""

from __future__ import annotations

from workers.forwarder.metrics import ForwarderMetrics
from workers.forwarder.processor import SpanForwarder
from workers.forwarder.settings import load_settings
from workers.runtime.app import WorkerContext, main_for


def build(ctx: WorkerContext) -> SpanForwarder:
    return SpanForwarder(load_settings(), ForwarderMetrics(ctx.registry), ctx.settings.topics.spans)


if __name__ == "__main__":
    main_for("forwarder", build)
