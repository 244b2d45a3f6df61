"""Margins and effects of interest come from the config (`shadow.margins`, `shadow.effects`)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from workers.shadow.compare import compare
from workers.shadow.config import ShadowConfig
from workers.shadow.live import compare_settings
from workers.shadow.table import PairTable


def _equal_scores(n: int = 3000) -> PairTable:
    rng = np.random.default_rng(3)
    prod = rng.beta(4, 1.5, n)
    cand = np.clip(prod + rng.normal(0, 0.05, n), 0, 1)
    return PairTable(["faithfulness_score"], prod[:, None], cand[:, None], {})


def test_the_configured_margin_decides_equivalence_and_the_effect_sizes_the_power() -> None:
    table = _equal_scores()
    default = compare(table, compare_settings(ShadowConfig(resamples=200))).metrics[0]
    assert default.verdict == "equivalent"  # inside the default ±0.02
    config = ShadowConfig(
        resamples=200, margins={"faithfulness_score": 0.001}, effects={"faithfulness_score": 0.001}
    )
    strict = compare(table, compare_settings(config)).metrics[0]
    assert strict.verdict == "inconclusive"  # the sequence is wider than ±0.001
    assert strict.pairs_needed is not None and default.pairs_needed is not None
    assert strict.pairs_needed > default.pairs_needed  # a smaller effect needs more pairs


def test_margins_must_be_positive() -> None:
    with pytest.raises(ValidationError, match="margins.faithful"):
        ShadowConfig(margins={"faithful": 0})
