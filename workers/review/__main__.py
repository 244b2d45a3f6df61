"""`ragmon worker review` / `python -m workers.review`."""

from __future__ import annotations

import os
from pathlib import Path

from service.contracts.config import CONFIG_ENV, ConfigError, load_section
from workers.review.config import ReviewConfig, config_version
from workers.review.metrics import ReviewMetrics
from workers.review.processor import ReviewProcessor
from workers.review.store import QueueStore
from workers.runtime.app import WorkerContext, main_for


def build(ctx: WorkerContext) -> ReviewProcessor:
    config = load_section("review", ReviewConfig)
    url = ctx.settings.database_url
    if not url:
        raise ConfigError(
            "RAGMON_DATABASE_URL is not set: the review sampler writes its queue to PostgreSQL "
            "(`ragmon up` starts a private one)"
        )
    path = os.environ.get(CONFIG_ENV)
    store = QueueStore(url, config, config_version(Path(path).read_text() if path else ""))
    return ReviewProcessor(config, ReviewMetrics(ctx.registry), ctx.redis, store)


if __name__ == "__main__":
    main_for("review", build)
