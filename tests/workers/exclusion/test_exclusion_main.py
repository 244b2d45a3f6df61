"""build(ctx): the processor the runtime gets, configured from the `exclusion` config section
(read by the entry point, workers/runtime/config.py, and handed over as ctx.config)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.contracts import Topics
from service.contracts.config import ConfigError
from tests.workers.exclusion.exclusion_events import candidate, trace
from workers.exclusion.__main__ import WORKER, build
from workers.runtime.config import load_worker_config


def context(client: redis.Redis) -> SimpleNamespace:
    settings = SimpleNamespace(topics=Topics("exclusion-main"))
    config = load_worker_config(WORKER.name, WORKER.config)
    return SimpleNamespace(
        settings=settings, registry=CollectorRegistry(), emitter=None, redis=client, config=config
    )


def test_build_reads_the_exclusion_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_client: redis.Redis
) -> None:
    config = tmp_path / "ragmon.yaml"
    config.write_text("exclusion:\n  proxy_score_threshold: 0.4\n  proxy_top_k: 1\n  intents: [billing]\n")
    monkeypatch.setenv("RAGMON_CONFIG", str(config))
    ctx = context(redis_client)
    processor = build(ctx)
    assert (processor.name, processor.event_types) == ("exclusion", ("trace", "label"))
    assert processor.readiness().ready
    # 0.5 clears the configured 0.4 (the default 0.8 would leave this sample without gold).
    processor.process([trace("t1", candidates=[candidate("g", "fr-FR", 0.5), candidate("h", "en-US", 0.45)])])
    labels = {"tenant": "acme", "variant": "production", "source": "proxy", "intent": "billing"}
    assert ctx.registry.get_sample_value("ragmon_exclusion_falsely_excluded_queries_total", labels) == 1
    assert ctx.registry.get_sample_value("ragmon_exclusion_eligible_gold_documents_total", labels) == 1


def test_a_bad_section_fails_at_start_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_client: redis.Redis
) -> None:
    config = tmp_path / "ragmon.yaml"
    config.write_text("exclusion:\n  proxy_top_k: 0\n")
    monkeypatch.setenv("RAGMON_CONFIG", str(config))
    with pytest.raises(ConfigError, match=r"exclusion\.proxy_top_k"):
        load_worker_config(WORKER.name, WORKER.config)
