"""build(ctx): the processor the runtime gets, configured from the `faithfulness` config section
(read by the entry point, workers/runtime/config.py, and handed over as ctx.config)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from prometheus_client import CollectorRegistry

from service.contracts import Topics
from service.contracts.config import ConfigError
from tests.workers.faithfulness.faithfulness_events import CollectingEmitter, trace
from tests.workers.faithfulness.hhem_builder import TinyHHEM
from workers.faithfulness.__main__ import WORKER, build
from workers.runtime.config import load_worker_config


def context() -> SimpleNamespace:
    return SimpleNamespace(
        settings=SimpleNamespace(topics=Topics("t9")),
        registry=CollectorRegistry(),
        emitter=CollectingEmitter(),
        redis=None,
        config=load_worker_config(WORKER.name, WORKER.config),
        sections={name: load_worker_config(name, model) for name, model in WORKER.sections},
    )


def write_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, section: dict[str, object]) -> None:
    path = tmp_path / "ragmon.yaml"
    path.write_text(yaml.safe_dump({"faithfulness": section}))
    monkeypatch.setenv("RAGMON_CONFIG", str(path))


def test_build_reads_the_faithfulness_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_hhem: TinyHHEM
) -> None:
    write_config(
        tmp_path, monkeypatch, {"model": str(tiny_hhem.model_dir), "sample_rate": 1.0, "mode": "sentences"}
    )
    ctx = context()
    processor = build(ctx)
    assert (processor.name, processor.event_types) == ("faithfulness", ("trace",))
    assert processor.readiness().ready
    processor.process(
        [trace("t-1", "Refunds take 30 days. Support is on weekdays.", ["Refunds take 30 days."])]
    )
    (record,) = ctx.emitter.records
    assert record.topic == "t9.scores"
    assert ctx.registry.get_sample_value("ragmon_faithfulness_pairs_total", {"source": "model"}) == 2


def test_a_bad_section_fails_at_start_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path, monkeypatch, {"sample_rate": 1.5})
    with pytest.raises(ConfigError, match=r"faithfulness\.sample_rate"):
        load_worker_config(WORKER.name, WORKER.config)


def test_a_model_that_cannot_load_does_not_fail_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path, monkeypatch, {"model": str(tmp_path / "absent")})
    ctx = context()
    processor = build(ctx)
    assert not processor.readiness().ready
    assert ctx.registry.get_sample_value("ragmon_faithfulness_scorer_up") == 0
