"""Reads HHEM-2.1-Open's safetensors weights into EncoderWeights, checking every tensor.

Vectara publishes the model as a wrapper (`HHEMv2ForSequenceClassification`)
whose only submodule is `t5`, a transformers `T5ForTokenClassification`; its
weights are therefore named `t5.transformer.encoder.block.<i>...` and
`t5.classifier.*`. A bare `T5ForTokenClassification` checkpoint (no `t5.`
prefix) is accepted too. The embedding is tied between `transformer.shared`
and `transformer.encoder.embed_tokens`, and a save keeps either name, so both
are accepted. Anything else is refused: a key we do not expect means a layout
we do not understand, and silently ignoring weights would produce scores that
look plausible and mean nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open

from workers.faithfulness.encoder import BlockWeights, EncoderShape, EncoderWeights

WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
EMBEDDING_KEYS = ("transformer.shared.weight", "transformer.encoder.embed_tokens.weight")
NUM_LABELS = 2


class CheckpointError(Exception):
    """The weights do not match the HHEM layout; the message names the file and tensor."""


def weight_files(directory: Path) -> list[Path]:
    index = directory / WEIGHTS_INDEX
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, AttributeError) as exc:
            raise CheckpointError(
                f"{index}: not a safetensors index (needs a 'weight_map' object): {exc}"
            ) from exc
        files = [directory / name for name in shards]
    else:
        files = [directory / WEIGHTS_FILE]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise CheckpointError(
            f"{directory}: weights file(s) {', '.join(missing)} missing; the checkpoint needs "
            f"{WEIGHTS_FILE} (or {WEIGHTS_INDEX} and its shards)"
        )
    return files


def content_revision(files: list[Path]) -> str:
    """sha256 of the weight bytes: names exactly which weights produced a score."""
    digest = hashlib.sha256()
    for path in files:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 22):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()[:16]


class _TensorSource:
    """Every tensor of the checkpoint by name, read lazily from its shard."""

    def __init__(self, files: list[Path]) -> None:
        self._where: dict[str, Path] = {}
        for path in files:
            with safe_open(str(path), framework="pt") as handle:
                for key in handle.keys():  # noqa: SIM118 - safe_open is not a Mapping
                    self._where[key] = path
        self.prefix = "t5." if any(k.startswith("t5.") for k in self._where) else ""
        self._used: set[str] = set()

    def names(self) -> Iterator[str]:
        return iter(self._where)

    def has(self, name: str) -> bool:
        return self.prefix + name in self._where

    def take(self, name: str, expected: tuple[int, ...]) -> torch.Tensor:
        key = self.prefix + name
        path = self._where.get(key)
        if path is None:
            raise CheckpointError(f"tensor {key!r} is missing (expected shape {list(expected)})")
        with safe_open(str(path), framework="pt") as handle:
            tensor = handle.get_tensor(key)
        if tuple(tensor.shape) != expected:
            raise CheckpointError(
                f"{path.name}: tensor {key!r} has shape {list(tensor.shape)}, the foundation config "
                f"implies {list(expected)}"
            )
        self._used.add(key)
        return tensor.to(torch.float32)

    def unused(self) -> list[str]:
        return sorted(set(self._where) - self._used)


def _block(source: _TensorSource, shape: EncoderShape, index: int) -> BlockWeights:
    d, inner, ff = shape.d_model, shape.inner_dim, shape.d_ff
    base = f"transformer.encoder.block.{index}.layer."
    query = source.take(f"{base}0.SelfAttention.q.weight", (inner, d))
    key_value = [source.take(f"{base}0.SelfAttention.{n}.weight", (inner, d)) for n in ("k", "v")]
    if shape.gated:
        activated = source.take(f"{base}1.DenseReluDense.wi_0.weight", (ff, d))
        linear: torch.Tensor | None = source.take(f"{base}1.DenseReluDense.wi_1.weight", (ff, d))
    else:
        activated, linear = source.take(f"{base}1.DenseReluDense.wi.weight", (ff, d)), None
    return BlockWeights(
        attention_norm=source.take(f"{base}0.layer_norm.weight", (d,)),
        q=query,
        kv=torch.cat(key_value),
        output=source.take(f"{base}0.SelfAttention.o.weight", (d, inner)),
        ffn_norm=source.take(f"{base}1.layer_norm.weight", (d,)),
        ffn_activated=activated,
        ffn_linear=linear,
        ffn_out=source.take(f"{base}1.DenseReluDense.wo.weight", (d, ff)),
    )


def _embedding(source: _TensorSource, shape: EncoderShape) -> torch.Tensor:
    expected = (shape.vocab_size, shape.d_model)
    present = [name for name in EMBEDDING_KEYS if source.has(name)]
    if not present:
        raise CheckpointError(f"no embedding: expected one of {[source.prefix + k for k in EMBEDDING_KEYS]}")
    tensors = [source.take(name, expected) for name in present]
    if len(tensors) == 2 and not torch.equal(tensors[0], tensors[1]):
        raise CheckpointError(f"{' and '.join(source.prefix + k for k in present)} differ; T5 ties them")
    return tensors[0]


def read_weights(directory: Path, shape: EncoderShape) -> tuple[EncoderWeights, str]:
    """The encoder weights and their content revision; CheckpointError names what is wrong."""
    files = weight_files(directory)
    source = _TensorSource(files)
    if not source.has("transformer.encoder.final_layer_norm.weight"):
        sample = ", ".join(sorted(source.names())[:3])
        raise CheckpointError(
            f"{directory}: not a T5 token-classification checkpoint (no 't5.transformer.encoder.*' "
            f"tensors; found e.g. {sample or 'nothing'})"
        )
    d = shape.d_model
    weights = EncoderWeights(
        embedding=_embedding(source, shape),
        relative_bias=source.take(
            "transformer.encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
            (shape.num_buckets, shape.num_heads),
        ),
        blocks=[_block(source, shape, i) for i in range(shape.num_layers)],
        final_norm=source.take("transformer.encoder.final_layer_norm.weight", (d,)),
        classifier_weight=source.take("classifier.weight", (NUM_LABELS, d)),
        classifier_bias=source.take("classifier.bias", (NUM_LABELS,)),
    )
    unused = source.unused()
    if unused:
        raise CheckpointError(
            f"{directory}: {len(unused)} tensor(s) not part of the HHEM layout, e.g. {unused[:3]}; "
            "a checkpoint with more layers or a decoder does not match its foundation config"
        )
    return weights, content_revision(files)
