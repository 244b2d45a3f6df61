"""`ragmon up` and the faithfulness model: off with why and the fix without it, on from ./models with it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from service.local.embedded import free_port
from tests.service.local.test_up_supervisor import running_up
from tests.support.kafka import wait_until
from tests.workers.faithfulness.hhem_builder import random_hhem


@pytest.mark.slow
def test_without_the_model_up_says_faithfulness_is_off_why_and_the_fix(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # the hub, unreachable wherever this runs
    with running_up(tmp_path, "--workers", "faithfulness", cwd=tmp_path, env={"HF_ENDPOINT": closed}) as up:
        wait_until(lambda: "Faithfulness: " in up.text(), 90, what="the faithfulness line")
        text = up.text()
        line = text[text.index("Faithfulness: ") :]
        assert line.startswith(
            "Faithfulness: off: faithfulness.model: 'vectara/hallucination_evaluation_model' "
            "is no local directory and could not be fetched as a hub id"
        ), line
        assert "Fix: `ragmon models fetch`" in line and "uses ./models by itself" in line
        assert not up.ok(up.worker + "/readyz")


@pytest.mark.slow
def test_with_models_fetched_up_uses_them(tmp_path: Path) -> None:
    """A directory with the files `ragmon models fetch` writes (a tiny checkpoint of HHEM's layout here)."""
    models = tmp_path / "models"
    random_hhem(models / "flan-t5-base", models / "hhem-2.1-open", "google/flan-t5-base", seed=3)
    with running_up(tmp_path, "--workers", "faithfulness", cwd=tmp_path) as up:
        wait_until(lambda: "Faithfulness: on" in up.text(), 90, what="the faithfulness worker on")
        assert f"Faithfulness: using {models}" in up.text()
        assert up.ok(up.worker + "/readyz")
    shutil.rmtree(models)
