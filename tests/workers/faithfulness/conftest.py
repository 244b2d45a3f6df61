"""Fixtures of the faithfulness tests: one tiny HHEM checkpoint per session, loaded by the real loader."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast

from tests.workers.faithfulness.hhem_builder import TinyHHEM, random_hhem
from workers.faithfulness.loader import LoadedModel, load_hhem


@pytest.fixture(scope="session")
def tiny_hhem(tmp_path_factory: pytest.TempPathFactory) -> TinyHHEM:
    root = tmp_path_factory.mktemp("hhem")
    foundation = root / "flan-t5-tiny"
    model = random_hhem(foundation, root / "hhem", str(foundation), seed=1234)
    reference_tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(foundation / "tokenizer.json"),
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    return TinyHHEM(root / "hhem", foundation, model, reference_tokenizer)


@pytest.fixture
def hhem_copy(tiny_hhem: TinyHHEM, tmp_path: Path) -> Callable[[str], Path]:
    """Copy the checkpoint directory to tmp_path/<name>, for tests that alter or move it."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(tiny_hhem.model_dir, target)
        return target

    return copy


@pytest.fixture(scope="session")
def loaded(tiny_hhem: TinyHHEM) -> LoadedModel:
    return load_hhem(str(tiny_hhem.model_dir))
