"""`ragmon worker review` / `python -m workers.review`: the review sampler, into PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path

from service.contracts.config import CONFIG_ENV
from workers.checks.config import ChecksConfig
from workers.review.config import ReviewConfig, config_version
from workers.review.metrics import ReviewMetrics
from workers.review.processor import ReviewProcessor
from workers.review.store import QueueStore
from workers.runtime.app import WorkerContext, WorkerSpec, main_for
from workers.runtime.reviewstore import database_url


def build(ctx: WorkerContext[ReviewConfig]) -> ReviewProcessor:
    url = database_url(ctx.settings.database_url, "the review sampler writes its queue to PostgreSQL")
    path = os.environ.get(CONFIG_ENV)
    store = QueueStore(url, ctx.config, config_version(Path(path).read_text() if path else ""))
    checks = ctx.sections.get("checks")  # the answer checks' section (docs/checks.md)
    return ReviewProcessor(ctx.config, ReviewMetrics(ctx.registry), ctx.redis, store, checks)


WORKER = WorkerSpec("review", build, ReviewConfig, sections=(("checks", ChecksConfig),))

if __name__ == "__main__":
    main_for(WORKER)
