"""The loader reads the published HHEM layout, and every way it can fail names the path or id and the fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import huggingface_hub.constants
import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.workers.faithfulness.hhem_builder import TinyHHEM, random_model, save_hhem, small_config
from workers.faithfulness.loader import LoadError, load_hhem
from workers.faithfulness.scorer import HHEMScorer

BLOCK1_Q = "t5.transformer.encoder.block.1.layer.0.SelfAttention.q.weight"


def rewrite_config(directory: Path, **changes: object) -> None:
    path = directory / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path.write_text(json.dumps(config))


def rewrite_weights(directory: Path, edit: Callable[[dict[str, torch.Tensor]], object]) -> None:
    tensors = load_file(str(directory / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(directory / "model.safetensors"))


def test_reads_the_published_layout(tiny_hhem: TinyHHEM) -> None:
    model = load_hhem(str(tiny_hhem.model_dir))
    config = tiny_hhem.reference.config
    shape = model.shape
    assert (shape.d_model, shape.num_layers, shape.num_heads, shape.d_ff) == (
        config.d_model,
        config.num_layers,
        config.num_heads,
        config.d_ff,
    )
    assert (shape.gated, shape.activation) == (True, "gelu_new")
    assert model.source == str(tiny_hhem.model_dir)
    assert model.revision.startswith("sha256:") and len(model.revision) == len("sha256:") + 16
    # The tied embedding is the reference model's, and the head has 2 labels.
    assert torch.equal(model.encoder.embedding, tiny_hhem.reference.transformer.shared.weight)
    assert model.encoder.classifier_weight.shape == (2, config.d_model)


def test_either_name_of_the_tied_embedding_loads_the_same_model(tiny_hhem: TinyHHEM, tmp_path: Path) -> None:
    save_hhem(
        tiny_hhem.reference,
        tmp_path / "kept-embed-tokens",
        str(tiny_hhem.foundation_dir),
        keep="embed_tokens",
    )
    pairs = [("The refund window is 30 days.", "Refunds are possible for 30 days.")]
    original = HHEMScorer(load_hhem(str(tiny_hhem.model_dir))).score(pairs)
    renamed = HHEMScorer(load_hhem(str(tmp_path / "kept-embed-tokens"))).score(pairs)
    assert renamed[0].score == pytest.approx(original[0].score, abs=1e-7)


def test_the_revision_names_the_weights(
    tiny_hhem: TinyHHEM, hhem_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    same = load_hhem(str(hhem_copy("same"))).revision
    assert same == load_hhem(str(tiny_hhem.model_dir)).revision
    other = random_model(small_config(tiny_hhem.reference.config.vocab_size), seed=99)
    save_hhem(other, tmp_path / "other", str(tiny_hhem.foundation_dir))
    assert load_hhem(str(tmp_path / "other")).revision != same


def test_a_missing_directory_names_the_path_and_how_to_fix_it(tmp_path: Path) -> None:
    missing = tmp_path / "models" / "hhem"
    with pytest.raises(LoadError) as caught:
        load_hhem(str(missing))
    message = str(caught.value)
    assert message.startswith("faithfulness.model: ")
    assert str(missing) in message
    assert "huggingface-cli download vectara/hallucination_evaluation_model" in message


def test_an_unreachable_hub_id_names_the_id_and_how_to_fix_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Offline mode and an empty cache: the hub client fails at once, as it would on a host without access.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    with pytest.raises(LoadError) as caught:
        load_hhem("vectara/hallucination_evaluation_model", revision="main")
    message = str(caught.value)
    assert "'vectara/hallucination_evaluation_model'" in message and "revision main" in message
    assert "Fix: " in message and "--local-dir" in message


def test_a_config_without_foundation_is_refused(hhem_copy: Callable[[str], Path]) -> None:
    directory = hhem_copy("no-foundation")
    rewrite_config(directory, foundation=None)
    with pytest.raises(
        LoadError, match=r"config\.json is not an HHEM-2 config \(foundation: Field required\)"
    ):
        load_hhem(str(directory))


def test_another_prompt_template_is_refused(hhem_copy: Callable[[str], Path]) -> None:
    directory = hhem_copy("other-prompt")
    rewrite_config(directory, prompt="Premise: {text1} Hypothesis: {text2}")
    with pytest.raises(LoadError, match="declares prompt 'Premise: {text1} Hypothesis: {text2}'"):
        load_hhem(str(directory))


def test_another_model_type_is_refused(hhem_copy: Callable[[str], Path]) -> None:
    directory = hhem_copy("bert")
    rewrite_config(directory, model_type="bert")
    with pytest.raises(LoadError, match="model_type 'bert'"):
        load_hhem(str(directory))


def test_a_missing_tensor_is_named(hhem_copy: Callable[[str], Path]) -> None:
    directory = hhem_copy("missing-tensor")
    rewrite_weights(directory, lambda tensors: tensors.pop(BLOCK1_Q))
    with pytest.raises(LoadError, match=f"tensor '{BLOCK1_Q}' is missing"):
        load_hhem(str(directory))


def test_a_tensor_of_the_wrong_shape_is_named(hhem_copy: Callable[[str], Path]) -> None:
    directory = hhem_copy("wrong-shape")

    def shrink(tensors: dict[str, torch.Tensor]) -> None:
        tensors[BLOCK1_Q] = tensors[BLOCK1_Q][:8].clone()

    rewrite_weights(directory, shrink)
    with pytest.raises(LoadError, match=rf"tensor '{BLOCK1_Q}' has shape \[8, 32\]"):
        load_hhem(str(directory))


def test_tensors_outside_the_layout_are_refused(hhem_copy: Callable[[str], Path]) -> None:
    directory = hhem_copy("decoder")

    def add_decoder(tensors: dict[str, torch.Tensor]) -> None:
        tensors["t5.transformer.decoder.final_layer_norm.weight"] = torch.ones(32)

    rewrite_weights(directory, add_decoder)
    with pytest.raises(LoadError, match=r"1 tensor\(s\) not part of the HHEM layout.*decoder"):
        load_hhem(str(directory))


def test_a_foundation_without_its_tokenizer_names_the_file(tiny_hhem: TinyHHEM, tmp_path: Path) -> None:
    foundation = tmp_path / "flan-without-tokenizer"
    foundation.mkdir()
    (foundation / "config.json").write_text((tiny_hhem.foundation_dir / "config.json").read_text())
    with pytest.raises(LoadError) as caught:
        load_hhem(str(tiny_hhem.model_dir), foundation=str(foundation))
    message = str(caught.value)
    assert f"faithfulness.foundation: {foundation / 'tokenizer.json'} is missing" in message
    assert "huggingface-cli download google/flan-t5-base config.json tokenizer.json" in message


def test_the_foundation_can_be_given_instead_of_the_one_in_the_checkpoint(
    tiny_hhem: TinyHHEM, hhem_copy: Callable[[str], Path]
) -> None:
    # The published config names "google/flan-t5-base"; an offline host points at its own copy.
    directory = hhem_copy("hub-foundation")
    rewrite_config(directory, foundation="/nowhere/flan-t5-base")
    with pytest.raises(
        LoadError, match="faithfulness.foundation: '/nowhere/flan-t5-base' is not a directory"
    ):
        load_hhem(str(directory))
    assert load_hhem(str(directory), foundation=str(tiny_hhem.foundation_dir)).shape.d_model == 32


def test_a_foundation_config_that_disagrees_with_the_weights_is_refused(
    tiny_hhem: TinyHHEM, tmp_path: Path
) -> None:
    foundation = tmp_path / "three-layers"
    foundation.mkdir()
    config = json.loads((tiny_hhem.foundation_dir / "config.json").read_text())
    (foundation / "config.json").write_text(json.dumps({**config, "num_layers": 3}))
    (foundation / "tokenizer.json").write_text((tiny_hhem.foundation_dir / "tokenizer.json").read_text())
    with pytest.raises(LoadError, match=r"block\.2\.layer\.0\.SelfAttention\.q\.weight' is missing"):
        load_hhem(str(tiny_hhem.model_dir), foundation=str(foundation))
