"""The encoder's matrix products: fused forms equal their plain composition, on either path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from workers.faithfulness.encoder import ROW_BUCKET, bucket_rows
from workers.faithfulness.kernels import Linear, onednn_usable

CPU = torch.device("cpu")
PATHS = [
    False,
    pytest.param(True, marks=pytest.mark.skipif(not onednn_usable(CPU, "auto"), reason="no oneDNN")),
]


@pytest.mark.parametrize("onednn", PATHS)
def test_fused_products_equal_their_plain_composition(onednn: bool) -> None:
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(48, 32, generator=generator) / 6
    x = torch.randn(2, 7, 32, generator=generator)
    other = torch.randn(2, 7, 48, generator=generator)
    linear = Linear(weight, onednn)
    plain = F.linear(x, weight)
    with torch.inference_mode():
        assert torch.allclose(linear(x), plain, atol=1e-5)
        assert torch.allclose(linear.activated(x, "gelu_new"), F.gelu(plain, approximate="tanh"), atol=1e-5)
        assert torch.allclose(linear.activated(x, "relu"), F.relu(plain), atol=1e-5)
        assert torch.allclose(linear.times(x, other), plain * other, atol=1e-5)
        assert torch.allclose(linear.plus(x, other), plain + other, atol=1e-5)
        # The last block's residual is a strided view (position 0 of every row).
        assert torch.allclose(linear.plus(x[:, :1], other[:, :1]), plain[:, :1] + other[:, :1], atol=1e-5)


def test_plain_products_are_used_off_cpu_or_when_configured() -> None:
    assert not onednn_usable(torch.device("cuda"), "auto")
    assert not onednn_usable(CPU, "torch")


def test_token_rows_are_padded_to_a_few_bucketed_counts() -> None:
    # A bounded set of row counts is what keeps oneDNN's compiled products cached (see kernels.py).
    counts = {bucket_rows(torch.ones(rows, dtype=torch.long), pad_id=0).shape[0] for rows in range(1, 2049)}
    assert counts == {ROW_BUCKET * k for k in range(1, 2048 // ROW_BUCKET + 1)}
    padded = bucket_rows(torch.arange(1, 131), pad_id=0)
    assert padded.shape[0] == 2 * ROW_BUCKET
    assert torch.equal(padded[:130], torch.arange(1, 131)) and not padded[130:].any()
