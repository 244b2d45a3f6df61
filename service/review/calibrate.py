"""Threshold calibration of a judge against human labels, with a held-out check.

The threshold is chosen (Youden's J) on one half of the labelled items and
reported on the other half, so the figures are not flattered by the choice.
The half an item falls in is fixed by a hash of its id: adding labels never
moves an item between halves. When the held-out interval of balanced accuracy
is wider than `max_interval_width`, no threshold is suggested: "label more".

Each figure comes twice: on the reviewed mix (every item counts once), and
re-weighted to the population by each item's 1/π (`population`: the strata
oversample low-confidence and thumbs-down traces, so the mix is not what
production looks like). The threshold is chosen on the reviewed mix, whose
oversampled near-threshold items are what a threshold choice needs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from service.contracts.stats import json_finite
from service.review.stats import (
    BalancedAccuracy,
    Confusion,
    Kappa,
    Weighted,
    auc,
    balanced_accuracy,
    cohen_kappa,
    roc,
    weighted_balanced_accuracy,
    weighted_kappa,
    youden_threshold,
)

DEFAULT_MAX_INTERVAL_WIDTH = 0.2


@dataclass(frozen=True)
class Scored:
    """One labelled item: the judge's score and the human verdict (True = pass)."""

    item: str
    score: float
    human: bool
    weight: float = 1.0  # 1/π: how many production traces this reviewed one stands for
    stratum: str = ""


def in_selection_half(item: str) -> bool:
    return hashlib.sha256(item.encode()).digest()[0] < 128


@dataclass(frozen=True)
class PopulationFigures:
    """The same figures with each item weighted by 1/π (stratified weighted-bootstrap intervals)."""

    balanced_accuracy: Weighted
    kappa: Weighted


@dataclass(frozen=True)
class ThresholdFigures:
    threshold: float
    balanced_accuracy: BalancedAccuracy  # on the reviewed mix
    kappa: Kappa | None  # on the reviewed mix
    population: PopulationFigures | None = None


def figures_at(threshold: float, items: Sequence[Scored]) -> ThresholdFigures:
    truth = [s.human for s in items]
    predicted = [s.score >= threshold for s in items]
    weights = [s.weight for s in items]
    strata = [s.stratum for s in items]
    population = PopulationFigures(
        weighted_balanced_accuracy(truth, predicted, weights, strata),
        weighted_kappa(truth, predicted, weights, strata),
    )
    return ThresholdFigures(
        threshold,
        balanced_accuracy(truth, predicted),
        cohen_kappa(Confusion.of(truth, predicted)),
        population,
    )


@dataclass
class CalibrationReport:
    kind: str
    n: int
    n_selection: int
    n_heldout: int
    auc: float | None
    configured: ThresholdFigures | None
    suggested: ThresholdFigures | None
    verdict: str  # "suggest" | "label_more"
    message: str
    roc: list[dict[str, float]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        return json_finite(out)  # the ROC's first point (threshold +inf) becomes null


def calibrate(
    kind: str,
    items: Sequence[Scored],
    configured_threshold: float | None,
    max_interval_width: float = DEFAULT_MAX_INTERVAL_WIDTH,
) -> CalibrationReport:
    selection = [s for s in items if in_selection_half(s.item)]
    heldout = [s for s in items if not in_selection_half(s.item)]
    points = roc([s.score for s in items], [s.human for s in items])
    configured = (
        figures_at(configured_threshold, heldout) if configured_threshold is not None and heldout else None
    )
    chosen = youden_threshold([s.score for s in selection], [s.human for s in selection])
    report = CalibrationReport(
        kind,
        len(items),
        len(selection),
        len(heldout),
        auc(points),
        configured,
        None,
        "label_more",
        "",
        [{"threshold": p.threshold, "tpr": p.tpr, "fpr": p.fpr} for p in points],
    )
    if chosen is None:
        report.message = (
            f"label more: the selection half ({len(selection)} items) needs both passing and failing "
            "human labels to choose a threshold"
        )
        return report
    suggested = figures_at(chosen, heldout)
    report.suggested = suggested
    interval = suggested.balanced_accuracy.interval
    if interval is None:
        report.message = (
            f"label more: the held-out half ({len(heldout)} items) needs both passing and failing "
            "human labels to check the threshold"
        )
    elif interval.width > max_interval_width:
        report.message = (
            f"label more: held-out balanced accuracy interval is {interval.width:.2f} wide "
            f"(limit {max_interval_width:.2f}) on {len(heldout)} items; no threshold suggested"
        )
    else:
        report.verdict = "suggest"
        report.message = (
            f"suggested threshold {chosen:.3f} (Youden's J on {len(selection)}, checked on {len(heldout)})"
        )
    return report
