"""HHEM-2.1-Open's network: a T5 encoder with a 2-label token-classification head.

Only the first position's logits are ever read (DESIGN.md: score = softmax of
position 0, label 1), so this is written against the checkpoint's tensors
rather than transformers' module tree, to do less work than the generic model:

- the relative-position bias and the padding mask are built once per batch and
  shared by every block (T5 computes the bias in block 0 only);
- q/k/v and the two gated-FFN input projections are fused into one matrix
  each, so a block runs three large matrix products instead of seven small ones;
- the last block attends and runs its FFN for position 0 only: no later layer
  needs the other positions.

The arithmetic is T5's (RMS norm without mean or bias, unscaled dot-product
attention, gated-GELU or ReLU FFN); tests compare it with transformers' T5 on
the same weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

LABEL_CONSISTENT = 1


@dataclass(frozen=True)
class EncoderShape:
    vocab_size: int
    d_model: int
    d_kv: int
    d_ff: int
    num_layers: int
    num_heads: int
    num_buckets: int
    max_distance: int
    layer_norm_epsilon: float
    gated: bool
    activation: str  # "gelu_new" (tanh-approximated GELU) or "relu"
    pad_token_id: int

    @property
    def inner_dim(self) -> int:
        return self.num_heads * self.d_kv


@dataclass(frozen=True)
class BlockWeights:
    attention_norm: torch.Tensor  # (d_model,)
    qkv: torch.Tensor  # (3 * inner, d_model): q, k, v stacked
    output: torch.Tensor  # (d_model, inner)
    ffn_norm: torch.Tensor  # (d_model,)
    ffn_in: torch.Tensor  # (2 * d_ff, d_model) gated: wi_0 (activated) then wi_1; else (d_ff, d_model)
    ffn_out: torch.Tensor  # (d_model, d_ff)


@dataclass(frozen=True)
class EncoderWeights:
    embedding: torch.Tensor  # (vocab, d_model)
    relative_bias: torch.Tensor  # (num_buckets, num_heads), from block 0
    blocks: tuple[BlockWeights, ...]
    final_norm: torch.Tensor  # (d_model,)
    classifier_weight: torch.Tensor  # (2, d_model)
    classifier_bias: torch.Tensor  # (2,)

    def to(self, device: torch.device) -> EncoderWeights:
        moved = tuple(
            BlockWeights(*(getattr(b, f).to(device) for f in BlockWeights.__dataclass_fields__)) for b in self.blocks
        )
        return replace(
            self,
            embedding=self.embedding.to(device),
            relative_bias=self.relative_bias.to(device),
            blocks=moved,
            final_norm=self.final_norm.to(device),
            classifier_weight=self.classifier_weight.to(device),
            classifier_bias=self.classifier_bias.to(device),
        )


def relative_position_buckets(length: int, shape: EncoderShape, device: torch.device) -> torch.Tensor:
    """T5's bidirectional bucketing of (key - query) distances: exact near, log-spaced far."""
    position = torch.arange(length, dtype=torch.long, device=device)
    relative = position[None, :] - position[:, None]
    half = shape.num_buckets // 2
    buckets = (relative > 0).to(torch.long) * half
    distance = relative.abs()
    max_exact = half // 2
    # Same operation order as the reference implementation, so float rounding
    # puts every distance in the same bucket; clamp only avoids log(0), whose
    # result the torch.where below discards anyway.
    far = max_exact + (
        torch.log(distance.clamp(min=1).float() / max_exact)
        / math.log(shape.max_distance / max_exact)
        * (half - max_exact)
    ).to(torch.long)
    far = far.clamp(max=half - 1)
    return buckets + torch.where(distance < max_exact, distance, far)


def attention_bias(weights: EncoderWeights, shape: EncoderShape, mask: torch.Tensor | None, length: int) -> torch.Tensor:
    """Position bias (1, H, L, L), plus a large negative on padded keys when `mask` is given."""
    buckets = relative_position_buckets(length, shape, weights.embedding.device)
    bias = F.embedding(buckets, weights.relative_bias).permute(2, 0, 1).unsqueeze(0)
    if mask is None:
        return bias
    padded = (1.0 - mask[:, None, None, :].to(bias.dtype)) * torch.finfo(bias.dtype).min
    return bias + padded


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _activation(x: torch.Tensor, name: str) -> torch.Tensor:
    return F.gelu(x, approximate="tanh") if name == "gelu_new" else F.relu(x)


def _block(x: torch.Tensor, block: BlockWeights, bias: torch.Tensor, shape: EncoderShape, first_only: bool) -> torch.Tensor:
    batch, length, _ = x.shape
    inner = shape.inner_dim
    h = _rms_norm(x, block.attention_norm, shape.layer_norm_epsilon)
    if first_only:
        q = F.linear(h[:, :1], block.qkv[:inner])
        k, v = F.linear(h, block.qkv[inner:]).split(inner, dim=-1)
        bias = bias[:, :, :1]
        x = x[:, :1]
    else:
        q, k, v = F.linear(h, block.qkv).split(inner, dim=-1)
    heads = (batch, -1, shape.num_heads, shape.d_kv)
    q, k, v = (t.reshape(heads).transpose(1, 2) for t in (q, k, v))
    # T5 does not scale q.k by 1/sqrt(d): the scale was folded into the weights in training.
    attended = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0)
    x = x + F.linear(attended.transpose(1, 2).reshape(batch, -1, inner), block.output)
    h = _rms_norm(x, block.ffn_norm, shape.layer_norm_epsilon)
    projected = F.linear(h, block.ffn_in)
    if shape.gated:
        gate, linear = projected.split(shape.d_ff, dim=-1)
        projected = _activation(gate, shape.activation) * linear
    else:
        projected = _activation(projected, shape.activation)
    return x + F.linear(projected, block.ffn_out)


def consistent_probability(
    weights: EncoderWeights, shape: EncoderShape, input_ids: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """P(label 1 = consistent) from the first position's logits, one value per row.

    `mask` (1 = token, 0 = padding) may be None when no row is padded.
    Callers run this under torch.inference_mode().
    """
    x = F.embedding(input_ids, weights.embedding)
    bias = attention_bias(weights, shape, mask, input_ids.shape[1])
    last = len(weights.blocks) - 1
    for index, block in enumerate(weights.blocks):
        x = _block(x, block, bias, shape, first_only=index == last)
    first = _rms_norm(x[:, 0], weights.final_norm, shape.layer_norm_epsilon)
    logits = F.linear(first, weights.classifier_weight, weights.classifier_bias)
    return torch.softmax(logits, dim=-1)[:, LABEL_CONSISTENT]
