"""`ragmon worker phoenix` / `python -m workers.phoenix`: score events -> Phoenix annotations.

Off unless RAGMON_PHOENIX_URL is set (`ragmon up` starts it only then); see docs/phoenix.md.
"""

from __future__ import annotations

from workers.phoenix.gateway import PhoenixGateway
from workers.phoenix.metrics import PhoenixMetrics
from workers.phoenix.processor import PhoenixExporter
from workers.phoenix.settings import PhoenixSettings
from workers.phoenix.waiting import WaitingRoom
from workers.runtime.app import WorkerContext, WorkerSpec, main_for


def build(ctx: WorkerContext[PhoenixSettings]) -> PhoenixExporter:
    settings = ctx.config
    metrics = PhoenixMetrics(ctx.registry)
    waiting = WaitingRoom(
        ctx.redis,
        ctx.settings.group_id(ctx.name),
        settings.retry_interval_s,
        settings.max_waiting,
        settings.max_waiting_per_tenant,
    )
    return PhoenixExporter(settings, PhoenixGateway(settings, metrics), waiting, metrics)


WORKER = WorkerSpec("phoenix", build, PhoenixSettings)

if __name__ == "__main__":
    main_for(WORKER)
