"""Matrix products of the encoder: oneDNN with prepacked weights on CPU, torch's F.linear elsewhere.

On CPU, F.linear goes to MKL's sgemm. oneDNN (shipped inside torch), with
each weight reordered once at load time into its blocked layout, ran the
encoder's fp32 products 25-45 % faster in our measurements on the 2-core AMD
EPYC (AVX-512) this project benchmarks on, and it can fuse what follows a
product (activation, gate multiplication, residual sum) into it. Results
differ from F.linear only by summation order (relative 1e-6). The op is
torch's internal `mkldnn._linear_pointwise` (what torch.compile emits for CPU
linears), so it is probed at load time against F.linear and the encoder falls
back to F.linear when it is missing or disagrees; `matmul: torch` in the
config forces the fallback.

oneDNN compiles a primitive per distinct matrix shape and caches it (two
caches, 1,024 entries each by default). Shapes that keep changing churn those
caches and fragment the heap: a worker fed micro-batches of ever new lengths
grew by ~6 MB per batch. The encoder therefore pads its token rows to a few
bucketed counts (encoder.bucket_rows), so the shapes it uses all stay cached,
and the caches are capped here as well (unless the environment sets them;
oneDNN reads them when it first runs, in a worker the load-time probe below).
"""

from __future__ import annotations

import logging
import os
from typing import Literal

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)
MatmulChoice = Literal["auto", "torch"]
# oneDNN picks the packed layout for this many rows; any row count works with it.
PACK_ROWS_HINT = 512
PROBE_TOLERANCE = 1e-4
PRIMITIVE_CACHE_CAPACITY = "512"
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", PRIMITIVE_CACHE_CAPACITY)  # oneDNN's own cache
os.environ.setdefault("LRU_CACHE_CAPACITY", PRIMITIVE_CACHE_CAPACITY)  # torch's ideep layer above it


def _onednn_ops_present() -> bool:
    mkldnn = getattr(torch.ops, "mkldnn", None)
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(mkldnn, "_reorder_linear_weight")
        and hasattr(mkldnn, "_linear_pointwise")
    )


def _pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), PACK_ROWS_HINT)


def _onednn(
    x: torch.Tensor, packed: torch.Tensor, activation: str = "none", algorithm: str = ""
) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, activation, [], algorithm)


def _onednn_binary(
    x: torch.Tensor, other: torch.Tensor, packed: torch.Tensor, operation: str
) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise.binary(x, other, packed, None, operation)


ONEDNN_ACTIVATIONS = {"gelu_new": ("gelu", "tanh"), "relu": ("relu", "")}


def activate(x: torch.Tensor, activation: str) -> torch.Tensor:
    """T5's FFN activations: gelu_new is GELU's tanh approximation."""
    return F.gelu(x, approximate="tanh") if activation == "gelu_new" else F.relu(x)


def _probe_difference() -> float:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(24, 40, generator=generator)
    x = torch.randn(3, 5, 40, generator=generator)
    other = torch.randn(3, 5, 24, generator=generator)
    fast, plain = Linear(weight, onednn=True), Linear(weight, onednn=False)
    pairs = [
        (fast(x), plain(x)),
        (fast.activated(x, "gelu_new"), plain.activated(x, "gelu_new")),
        (fast.activated(x, "relu"), plain.activated(x, "relu")),
        (fast.times(x, other), plain.times(x, other)),
        (fast.plus(x, other), plain.plus(x, other)),
    ]
    return max((a - b).abs().max().item() for a, b in pairs)


def onednn_usable(device: torch.device, choice: MatmulChoice) -> bool:
    """Whether oneDNN runs this process's products: CPU, present, and agreeing with F.linear."""
    if choice == "torch" or device.type != "cpu" or not _onednn_ops_present():
        return False
    try:
        with torch.inference_mode():
            difference = _probe_difference()
    except RuntimeError as exc:
        log.warning("oneDNN linear unavailable (%s); using F.linear", exc)
        return False
    if difference > PROBE_TOLERANCE:
        log.warning("oneDNN linear disagrees with F.linear by %.2e; using F.linear", difference)
        return False
    return True


class Linear:
    """x @ W.T for a weight W of shape (out, in), without bias, alone or fused with what follows it.

    The fused forms save a pass over the output in memory (oneDNN applies the
    activation, product or sum while the result is still in cache).
    """

    def __init__(self, weight: torch.Tensor, onednn: bool) -> None:
        self.out_features, self.in_features = weight.shape
        self.onednn = onednn
        # One copy is kept: with oneDNN, the packed layout replaces the weight.
        self._weight = _pack(weight) if onednn else weight

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.onednn:
            return _onednn(x, self._weight)
        return F.linear(x, self._weight)

    def activated(self, x: torch.Tensor, activation: str) -> torch.Tensor:
        if self.onednn:
            return _onednn(x, self._weight, *ONEDNN_ACTIVATIONS[activation])
        return activate(F.linear(x, self._weight), activation)

    def times(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        if self.onednn:
            return _onednn_binary(x, other, self._weight, "mul")
        return F.linear(x, self._weight) * other

    def plus(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        if self.onednn:
            return _onednn_binary(x, other, self._weight, "add")
        return F.linear(x, self._weight) + other
