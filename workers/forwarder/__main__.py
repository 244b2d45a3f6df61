"""`ragmon worker forwarder` / `python -m workers.forwarder`: raw spans -> an OTLP/HTTP collector (Phoenix).

Off unless RAGMON_FORWARD_ENDPOINT is set (`ragmon up` starts it only then); see docs/phoenix.md.
"""

from __future__ import annotations

from workers.forwarder.metrics import ForwarderMetrics
from workers.forwarder.processor import SpanForwarder
from workers.forwarder.settings import ForwarderSettings
from workers.runtime.app import WorkerContext, WorkerSpec, main_for


def build(ctx: WorkerContext[ForwarderSettings]) -> SpanForwarder:
    return SpanForwarder(ctx.config, ForwarderMetrics(ctx.registry), ctx.settings.topics.spans)


WORKER = WorkerSpec("forwarder", build, ForwarderSettings)

if __name__ == "__main__":
    main_for(WORKER)
