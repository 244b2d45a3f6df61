"""`ragmon models fetch|verify`: a clear failure without the hub, and verification of a directory built here.

The hub is unreachable from this machine; the fetch test also points HF_ENDPOINT at a
closed local port, so it never downloads anything wherever it runs. The directory the
verify tests check is a tiny checkpoint of HHEM's layout (the faithfulness tests'
builder), which the worker's real loader also accepts: verify and loader agree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.local.embedded import free_port
from tests.workers.faithfulness.hhem_builder import random_hhem
from workers.faithfulness.loader import load_hhem

ROOT = Path(__file__).resolve().parents[3]


def ragmon(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service.cli", "models", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    random_hhem(root / "flan-t5-base", root / "hhem-2.1-open", "google/flan-t5-base", seed=5)
    return root


@pytest.mark.slow
def test_fetch_without_the_hub_fails_naming_the_model_and_the_command(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    out = ragmon("fetch", "--dir", str(tmp_path / "m"), env={"HF_ENDPOINT": closed, "HF_HUB_OFFLINE": "0"})
    assert out.returncode == 1, out.stdout + out.stderr
    err = out.stderr.strip().splitlines()[-1]
    assert err.startswith(
        "ragmon models fetch failed: could not download vectara/hallucination_evaluation_model "
        "from the Hugging Face hub ("
    ), err
    assert f"Run `ragmon models fetch --dir {tmp_path / 'm'}` on a machine that reaches huggingface.co" in err
    assert not list((tmp_path / "m").glob("**/*.safetensors")), "nothing fake was left behind"


@pytest.mark.slow
def test_verify_accepts_a_complete_directory_that_the_loader_loads(models_dir: Path) -> None:
    out = ragmon("verify", "--dir", str(models_dir))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"model: {models_dir / 'hhem-2.1-open'}" in out.stdout
    assert f"foundation: {models_dir / 'flan-t5-base'}" in out.stdout
    loaded = load_hhem(str(models_dir / "hhem-2.1-open"), str(models_dir / "flan-t5-base"))
    assert loaded.encoder is not None


@pytest.mark.slow
@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("truncate", "tensors end at byte"),
        ("no_tokenizer", "flan-t5-base/tokenizer.json: missing"),
        ("no_weights", "no *.safetensors weights"),
        ("not_hhem", "not an HHEM-2 config"),
    ],
)
def test_verify_names_what_is_wrong(models_dir: Path, tmp_path: Path, damage: str, message: str) -> None:
    broken = tmp_path / "models"
    shutil.copytree(models_dir, broken)
    weights = broken / "hhem-2.1-open" / "model.safetensors"
    if damage == "truncate":  # a download cut short
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) - 100])
    elif damage == "no_tokenizer":
        (broken / "flan-t5-base" / "tokenizer.json").unlink()
    elif damage == "no_weights":
        weights.unlink()
    else:
        (broken / "hhem-2.1-open" / "config.json").write_text('{"model_type": "t5"}')
    out = ragmon("verify", "--dir", str(broken))
    assert out.returncode == 1, out.stdout + out.stderr
    assert message in out.stderr, out.stderr
    assert "not usable by the faithfulness worker" in out.stderr
