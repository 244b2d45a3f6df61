"""`ragmon worker probes` / `python -m workers.probes`: probe replays against their baselines (docs/probes.md)."""

from __future__ import annotations

from workers.probes.config import ProbesConfig
from workers.probes.metrics import ProbesMetrics
from workers.probes.processor import ProbesProcessor
from workers.probes.store import ProbeStore
from workers.runtime.app import WorkerContext, WorkerSpec, main_for
from workers.runtime.reviewstore import database_url


def build(ctx: WorkerContext[ProbesConfig]) -> ProbesProcessor:
    url = database_url(
        ctx.settings.database_url, "the probes worker keeps probe results and baselines in PostgreSQL"
    )
    store = ProbeStore(url, ctx.config.declare_grace_s, ctx.config.declare_window_s)
    return ProbesProcessor(ctx.config, ProbesMetrics(ctx.registry), store, ctx.settings.topics)


WORKER = WorkerSpec("probes", build, ProbesConfig)

if __name__ == "__main__":
    main_for(WORKER)
