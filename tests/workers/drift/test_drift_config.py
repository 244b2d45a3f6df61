"""The drift section of RAGMON_CONFIG: defaults, and errors that name the field and the rule."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
from prometheus_client import CollectorRegistry

from service.contracts.config import ConfigError
from service.contracts.topics import Topics
from workers.drift.__main__ import WORKER, build
from workers.drift.alibi_backend import alibi_available
from workers.drift.config import DriftConfig, load_drift_config
from workers.runtime.config import load_worker_config


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "ragmon.yaml"
    path.write_text("drift:\n" + body)
    return path


def test_defaults_are_valid() -> None:
    config = DriftConfig()
    assert config.encoder.enabled and config.app_embeddings.enabled
    assert (config.reference_size, config.current_size, config.alpha, config.permutations) == (
        1000,
        1000,
        0.01,
        1000,
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("  alpha: 0.01\n  permutations: 50\n", "permutations=50 cannot reach alpha=0.01"),
        (
            "  current_size: 100\n  min_current_size: 200\n",
            "min_current_size (200) must not exceed current_size (100)",
        ),
        ("  intents: [billing, all]\n", "intents: 'all' is reserved"),
        ("  window: 100\n", "drift.window: Extra inputs are not permitted"),
        ("  reference_size: 5\n", "drift.reference_size: Input should be greater than or equal to 10"),
        ("  encoder:\n    device: tpu\n", "drift.encoder.device: String should match pattern"),
        ("  sample: 0\n", "drift.sample: Input should be greater than 0"),
    ],
)
def test_invalid_settings_name_the_field_and_rule(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_drift_config(str(write(tmp_path, body)))
    assert message in str(info.value)


@pytest.mark.skipif(alibi_available(), reason="alibi-detect is installed here")
def test_the_alibi_backend_without_alibi_says_how_to_get_it_and_the_licence(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_drift_config(str(write(tmp_path, "  backend: alibi\n")))
    assert "backend: 'alibi' needs alibi-detect, which is not installed" in str(info.value)
    assert "BSL 1.1" in str(info.value)


def test_build_constructs_the_processor_from_the_runtime_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_client: redis.Redis
) -> None:
    monkeypatch.setenv(
        "RAGMON_CONFIG", str(write(tmp_path, "  encoder:\n    enabled: false\n  reference_size: 50\n"))
    )
    registry = CollectorRegistry()
    ctx = SimpleNamespace(
        settings=SimpleNamespace(redis_url="unused", topics=Topics()),
        registry=registry,
        emitter=None,
        redis=redis_client,
        config=load_worker_config(WORKER.name, WORKER.config),
    )
    proc = build(ctx)
    assert (proc.name, proc.event_types) == ("drift", ("trace", "feedback"))
    assert proc.config.reference_size == 50
    assert proc.readiness().ready
    proc.tick(0.0)
    proc.close()
