"""Our own loader for Vectara's HHEM-2.1-Open: no `trust_remote_code`, nothing executed from the hub.

The published checkpoint is a directory with
- config.json naming the foundation model (`"foundation": "google/flan-t5-base"`)
  and the prompt template, and
- model.safetensors with a T5 token-classification model with 2 labels.
The network's shape (layers, heads, FFN kind) and the tokenizer come from the
foundation: its config.json and tokenizer.json, read from a local directory or
fetched by hub id. Each step that can fail raises LoadError with the path or id
it tried and what to do about it, because the worker reports that message as
its readiness reason instead of crash-looping.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tokenizers import Tokenizer

from service.contracts.errors import describe_errors
from workers.faithfulness.checkpoint import CheckpointError, read_weights
from workers.faithfulness.config import HHEM_HUB_ID
from workers.faithfulness.encoder import EncoderShape, T5Encoder
from workers.faithfulness.kernels import MatmulChoice

PROMPT_TEMPLATE = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {premise}\n\nHypothesis: {hypothesis}"
# The checkpoint's config.json spells the same template with {text1}/{text2}.
CHECKPOINT_PROMPT = PROMPT_TEMPLATE.replace("{premise}", "{text1}").replace("{hypothesis}", "{text2}")
HHEM_MODEL_TYPES = ("HHEMv2", "HHEMv2Config")
FOUNDATION_FILES = ("config.json", "tokenizer.json")
CHECKPOINT_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "model-*.safetensors")
FFN_KINDS = {"gated-gelu": (True, "gelu_new"), "relu": (False, "relu"), "gated-relu": (True, "relu")}


class LoadError(Exception):
    """The model cannot be loaded; the message names what was tried and how to fix it."""


class CheckpointConfig(BaseModel):
    model_config = ConfigDict(extra="allow")

    foundation: str = Field(min_length=1)
    model_type: str | None = None
    prompt: str | None = None


class FoundationConfig(BaseModel):
    """The fields of a transformers T5Config that define the encoder's arithmetic."""

    model_config = ConfigDict(extra="allow")

    vocab_size: int = Field(gt=0)
    d_model: int = Field(gt=0)
    d_kv: int = Field(gt=0)
    d_ff: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    relative_attention_num_buckets: int = Field(32, ge=4)
    relative_attention_max_distance: int = Field(128, gt=0)
    layer_norm_epsilon: float = Field(1e-6, gt=0)
    feed_forward_proj: str = "relu"
    pad_token_id: int = Field(0, ge=0)

    def shape(self) -> EncoderShape:
        gated, activation = FFN_KINDS[self.feed_forward_proj]
        return EncoderShape(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            d_kv=self.d_kv,
            d_ff=self.d_ff,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance,
            layer_norm_epsilon=self.layer_norm_epsilon,
            gated=gated,
            activation=activation,
            pad_token_id=self.pad_token_id,
        )


@dataclass(frozen=True)
class LoadedModel:
    encoder: T5Encoder
    tokenizer: Tokenizer
    revision: str  # content hash of the weights
    source: str  # the directory or hub id it came from

    @property
    def shape(self) -> EncoderShape:
        return self.encoder.shape

    @property
    def device(self) -> torch.device:
        return self.encoder.device


def _looks_like_path(ref: str) -> bool:
    return ref.startswith(("/", "./", "../", "~")) or ref.count("/") != 1


def resolve(ref: str, field: str, patterns: tuple[str, ...], revision: str | None = None) -> Path:
    """A local directory for `ref`: itself when it is one, else a hub snapshot of the files matching `patterns`."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return path
    example = HHEM_HUB_ID if field == "faithfulness.model" else "google/flan-t5-base"
    if _looks_like_path(ref):
        raise LoadError(
            f"{field}: {ref!r} is not a directory. Fix: download the model there "
            f"(`huggingface-cli download {example} --local-dir {ref}`) or set {field} to a hub id such as {example!r}"
        )
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=ref, revision=revision, allow_patterns=list(patterns)))
    except Exception as exc:  # the hub client raises many types; all mean "not here"
        raise LoadError(
            f"{field}: {ref!r} is no local directory and could not be fetched as a hub id"
            f"{' at revision ' + revision if revision else ''} ({type(exc).__name__}: {exc}). Fix: where the hub is reachable run "
            f"`huggingface-cli download {ref} --local-dir /models/{ref.split('/')[-1]}` and set {field} to "
            f"that directory, or give this host access to the hub (HF_ENDPOINT, HTTPS proxy, HF_HUB_OFFLINE unset)"
        ) from exc


def _read_json(path: Path, field: str) -> dict[str, Any]:
    if not path.is_file():
        raise LoadError(f"{field}: {path} is missing. Fix: point {field} at the directory that holds it")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise LoadError(f"{field}: {path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise LoadError(f"{field}: {path} must hold a JSON object")
    return data


M = TypeVar("M", bound=BaseModel)


def _read_config(model: type[M], path: Path, field: str, what: str) -> M:
    """`path` (a JSON object) as `model`; else a LoadError: `{field}: {path} is not {what} (the errors)`."""
    try:
        return model.model_validate(_read_json(path, field))
    except ValidationError as exc:
        raise LoadError(f"{field}: {path} is not {what} ({describe_errors('', exc, rule=False)})") from exc


def read_checkpoint_config(directory: Path) -> CheckpointConfig:
    path = directory / "config.json"
    config = _read_config(CheckpointConfig, path, "faithfulness.model", "an HHEM-2 config")
    if config.model_type is not None and config.model_type not in HHEM_MODEL_TYPES:
        raise LoadError(
            f"faithfulness.model: {path} has model_type {config.model_type!r}, not one of {list(HHEM_MODEL_TYPES)}; "
            f"it is not an HHEM-2.1-Open checkpoint"
        )
    if config.prompt is not None and config.prompt != CHECKPOINT_PROMPT:
        raise LoadError(
            f"faithfulness.model: {path} declares prompt {config.prompt!r}, but this scorer applies "
            f"{CHECKPOINT_PROMPT!r}; a model trained on another template would be scored wrongly"
        )
    return config


def read_foundation(directory: Path) -> tuple[EncoderShape, Tokenizer]:
    path = directory / "config.json"
    foundation = _read_config(FoundationConfig, path, "faithfulness.foundation", "a T5 config")
    if foundation.feed_forward_proj not in FFN_KINDS:
        raise LoadError(
            f"faithfulness.foundation: {path} feed_forward_proj {foundation.feed_forward_proj!r} is not one of "
            f"{sorted(FFN_KINDS)}"
        )
    tokenizer_path = directory / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise LoadError(
            f"faithfulness.foundation: {tokenizer_path} is missing; the scorer reads the foundation's fast "
            f"tokenizer. Fix: `huggingface-cli download google/flan-t5-base config.json tokenizer.json "
            f"--local-dir {directory}`"
        )
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise LoadError(f"faithfulness.foundation: {tokenizer_path} is not a tokenizers file: {exc}") from exc
    # The reference (the model card's predict()) never truncates or pads per text;
    # the premise budget is ours to apply, and padding happens per micro-batch.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return foundation.shape(), tokenizer


def _device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise LoadError(
            f"faithfulness.device: {name!r} requested but no CUDA device is visible. Fix: set device: cpu"
        )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise LoadError(
            f"faithfulness.device: {name!r} requested but MPS is not available. Fix: set device: cpu"
        )
    return device


def load_hhem(
    model: str,
    foundation: str | None = None,
    revision: str | None = None,
    device: str = "cpu",
    matmul: MatmulChoice = "auto",
) -> LoadedModel:
    """Load HHEM-2.1-Open from a directory or hub id; LoadError says what went wrong and how to fix it."""
    target = _device(device)
    directory = resolve(model, "faithfulness.model", CHECKPOINT_FILES, revision)
    checkpoint = read_checkpoint_config(directory)
    foundation_ref = foundation or checkpoint.foundation
    foundation_dir = resolve(foundation_ref, "faithfulness.foundation", FOUNDATION_FILES)
    shape, tokenizer = read_foundation(foundation_dir)
    if tokenizer.get_vocab_size() > shape.vocab_size:
        raise LoadError(
            f"faithfulness.foundation: tokenizer has {tokenizer.get_vocab_size()} tokens but the model embeds "
            f"{shape.vocab_size}; the tokenizer belongs to another model"
        )
    try:
        weights, content = read_weights(directory, shape)
    except CheckpointError as exc:
        raise LoadError(
            f"faithfulness.model: {directory} does not match foundation {foundation_ref!r}: {exc}. Fix: use the "
            f"checkpoint's own foundation (google/flan-t5-base for HHEM-2.1-Open)"
        ) from exc
    return LoadedModel(
        encoder=T5Encoder(weights, shape, target, matmul),
        tokenizer=tokenizer,
        revision=content,
        source=model if revision is None else f"{model}@{revision}",
    )
