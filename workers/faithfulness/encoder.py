"""HHEM-2.1-Open's network: a T5 encoder with a 2-label token-classification head.

Only the first position's logits are ever read (docs/architecture.md: score =
softmax of position 0, label 1), so this is written against the checkpoint's tensors
rather than transformers' module tree, to do less work than the generic model:

- the relative-position bias and the padding mask are built once per batch and
  shared by every block (T5 computes the bias in block 0 only);
- k and v share one matrix product, and every product runs through
  kernels.Linear (prepacked oneDNN on CPU), fused with what follows it: the
  FFN activation, the gate's product, the residual sums;
- the last block attends and runs its FFN for position 0 only: no later layer
  needs the other positions;
- the batch runs as one matrix of token rows, padded to a multiple of
  ROW_BUCKET rows (see bucket_rows).

The arithmetic is T5's (RMS norm without mean or bias, unscaled dot-product
attention, gated-GELU or ReLU FFN); tests compare it with transformers' T5 on
the same weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from workers.faithfulness.kernels import Linear, MatmulChoice, onednn_usable

LABEL_CONSISTENT = 1
ROW_BUCKET = 128


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
    q: torch.Tensor  # (inner, d_model)
    kv: torch.Tensor  # (2 * inner, d_model): k then v
    output: torch.Tensor  # (d_model, inner)
    ffn_norm: torch.Tensor  # (d_model,)
    ffn_activated: torch.Tensor  # (d_ff, d_model): wi_0 when gated, else wi
    ffn_linear: torch.Tensor | None  # (d_ff, d_model): wi_1 when gated (multiplies the activation)
    ffn_out: torch.Tensor  # (d_model, d_ff)


@dataclass
class EncoderWeights:
    """The checkpoint's tensors, as read. T5Encoder consumes `blocks` one at a time."""

    embedding: torch.Tensor  # (vocab, d_model)
    relative_bias: torch.Tensor  # (num_buckets, num_heads), from block 0
    blocks: list[BlockWeights]
    final_norm: torch.Tensor  # (d_model,)
    classifier_weight: torch.Tensor  # (2, d_model)
    classifier_bias: torch.Tensor  # (2,)


@dataclass(frozen=True)
class Block:
    attention_norm: torch.Tensor
    q: Linear
    kv: Linear
    output: Linear
    ffn_norm: torch.Tensor
    ffn_activated: Linear
    ffn_linear: Linear | None
    ffn_out: Linear

    @classmethod
    def prepare(cls, raw: BlockWeights, device: torch.device, onednn: bool) -> Block:
        def linear(weight: torch.Tensor) -> Linear:
            return Linear(weight.to(device), onednn)

        return cls(
            attention_norm=raw.attention_norm.to(device),
            q=linear(raw.q),
            kv=linear(raw.kv),
            output=linear(raw.output),
            ffn_norm=raw.ffn_norm.to(device),
            ffn_activated=linear(raw.ffn_activated),
            ffn_linear=None if raw.ffn_linear is None else linear(raw.ffn_linear),
            ffn_out=linear(raw.ffn_out),
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


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class T5Encoder:
    def __init__(
        self, weights: EncoderWeights, shape: EncoderShape, device: torch.device, matmul: MatmulChoice
    ) -> None:
        """Move `weights` to `device` and prepare the products; takes ownership of weights.blocks.

        Blocks are converted one at a time and dropped from `weights`, so the
        checkpoint's raw copy and the prepared one never coexist in full.
        """
        self.shape = shape
        self.device = device
        self.kernel = "onednn" if onednn_usable(device, matmul) else "torch"
        onednn = self.kernel == "onednn"
        self.embedding = weights.embedding.to(device)
        self.relative_bias = weights.relative_bias.to(device)
        self.final_norm = weights.final_norm.to(device)
        self.classifier_weight = weights.classifier_weight.to(device)
        self.classifier_bias = weights.classifier_bias.to(device)
        blocks = []
        while weights.blocks:
            blocks.append(Block.prepare(weights.blocks.pop(0), device, onednn))
        self.blocks = tuple(blocks)

    def attention_bias(self, mask: torch.Tensor | None, length: int) -> torch.Tensor:
        """Position bias (1, H, L, L), plus a large negative on padded keys when `mask` is given."""
        buckets = relative_position_buckets(length, self.shape, self.device)
        bias = F.embedding(buckets, self.relative_bias).permute(2, 0, 1).unsqueeze(0)
        if mask is None:
            return bias
        padded = (1.0 - mask[:, None, None, :].to(bias.dtype)) * torch.finfo(bias.dtype).min
        return bias + padded

    def _attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, batch: int
    ) -> torch.Tensor:
        """Attention of q's rows over k's and v's, as (batch, positions of q, heads, d_kv)."""
        shape = self.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(batch, -1, shape.num_heads, shape.d_kv).transpose(1, 2)

        # T5 does not scale q.k by 1/sqrt(d): the scale was folded into the weights in training.
        attended = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), attn_mask=bias, scale=1.0)
        return attended.transpose(1, 2)

    def _feed_forward(self, x: torch.Tensor, block: Block) -> torch.Tensor:
        h = _rms_norm(x, block.ffn_norm, self.shape.layer_norm_epsilon)
        hidden = block.ffn_activated.activated(h, self.shape.activation)
        if block.ffn_linear is not None:
            hidden = block.ffn_linear.times(h, hidden)
        return block.ffn_out.plus(hidden, x)

    def _normed_keys_values(
        self, x: torch.Tensor, block: Block, rows: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A block's attention input: x normed (every row), and the keys and values of its first `rows` rows."""
        h = _rms_norm(x, block.attention_norm, self.shape.layer_norm_epsilon)
        k, v = block.kv(h)[:rows].split(self.shape.inner_dim, dim=-1)
        return h, k, v

    def _block(
        self, x: torch.Tensor, block: Block, bias: torch.Tensor, batch: int, length: int
    ) -> torch.Tensor:
        """One block over every row of x (batch * length real rows, then bucket padding rows)."""
        rows = batch * length
        h, k, v = self._normed_keys_values(x, block, rows)
        merged = x.new_empty((x.shape[0], self.shape.inner_dim))
        merged[rows:].zero_()
        merged[:rows].view(batch, length, self.shape.num_heads, self.shape.d_kv).copy_(
            self._attend(block.q(h)[:rows], k, v, bias, batch)
        )
        return self._feed_forward(block.output.plus(merged, x), block)

    def _last_block(
        self, x: torch.Tensor, block: Block, bias: torch.Tensor, batch: int, length: int
    ) -> torch.Tensor:
        """The last block for each sequence's first position only: (batch, d_model)."""
        rows = batch * length
        h, k, v = self._normed_keys_values(x, block, rows)
        first_h = h[:rows].view(batch, length, -1)[:, 0]
        first_x = x[:rows].view(batch, length, -1)[:, 0]
        merged = self._attend(block.q(first_h), k, v, bias[:, :, :1], batch).reshape(
            batch, self.shape.inner_dim
        )
        return self._feed_forward(block.output.plus(merged, first_x), block)

    def consistent_probability(self, input_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """P(label 1 = consistent) from the first position's logits, one value per row.

        `mask` (1 = token, 0 = padding) may be None when no row is padded.
        Callers run this under torch.inference_mode().
        """
        batch, length = input_ids.shape
        x = F.embedding(bucket_rows(input_ids.reshape(-1), self.shape.pad_token_id), self.embedding)
        bias = self.attention_bias(mask, length)
        for block in self.blocks[:-1]:
            x = self._block(x, block, bias, batch, length)
        first = self._last_block(x, self.blocks[-1], bias, batch, length)
        logits = F.linear(
            _rms_norm(first, self.final_norm, self.shape.layer_norm_epsilon),
            self.classifier_weight,
            self.classifier_bias,
        )
        return torch.softmax(logits, dim=-1)[:, LABEL_CONSISTENT]


def bucket_rows(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """The flattened token ids, padded to a multiple of ROW_BUCKET rows.

    Every matrix product then has one of a few row counts, so oneDNN compiles a
    bounded set of primitives and keeps reusing them (see kernels.py): a new
    row count per micro-batch would churn its caches and fragment the heap,
    which grew a worker by ~6 MB per batch in our measurements. The padding
    rows cost at most ROW_BUCKET - 1 rows of compute per micro-batch and never
    reach a real row: attention reads the real rows only.
    """
    extra = -ids.shape[0] % ROW_BUCKET
    return F.pad(ids, (0, extra), value=pad_id) if extra else ids
