"""PairTable: the paired outcomes one comparison runs on (production and candidate per pair and metric)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np


@dataclass
class PairTable:
    """n pairs x M metrics, in arrival order. NaN = the metric is absent for that pair
    (e.g. faithfulness is scored on a sample); slices map a dimension (intent,
    a configured metadata field) to one label per pair ("" = none)."""

    metrics: list[str]
    production: np.ndarray
    candidate: np.ndarray
    slices: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def pairs(self) -> int:
        return int(self.production.shape[0])

    def subset(self, mask: np.ndarray) -> PairTable:
        return PairTable(
            self.metrics,
            self.production[mask],
            self.candidate[mask],
            {k: v[mask] for k, v in self.slices.items()},
        )

    def is_binary(self, j: int) -> bool:
        values = np.concatenate([self.production[:, j], self.candidate[:, j]])
        values = values[~np.isnan(values)]
        return bool(values.size) and bool(np.isin(values, (0.0, 1.0)).all())


def build_table(
    pairs: Iterable[tuple[Mapping[str, float], Mapping[str, float], Mapping[str, str]]],
) -> PairTable:
    """From (production outcomes, candidate outcomes, slice labels) per pair."""
    rows = list(pairs)
    metrics = sorted({m for prod, cand, _ in rows for m in prod.keys() | cand.keys()})
    col = {m: j for j, m in enumerate(metrics)}
    production = np.full((len(rows), len(metrics)), np.nan)
    candidate = np.full((len(rows), len(metrics)), np.nan)
    dims = sorted({d for _, _, labels in rows for d in labels})
    slices = {d: np.full(len(rows), "", dtype=object) for d in dims}
    for i, (prod, cand, labels) in enumerate(rows):
        for m, v in prod.items():
            production[i, col[m]] = v
        for m, v in cand.items():
            candidate[i, col[m]] = v
        for d, label in labels.items():
            slices[d][i] = label
    return PairTable(metrics, production, candidate, slices)
