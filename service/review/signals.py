"""Implicit user signals against blind review: how far each can be read as "the answer was wrong".

For the traces of the blind stratum (a probability sample of production) that a reviewer labelled, each
implicit signal (thumbs down, regenerate, short dwell, edit, reformulation; and the positive ones, thumbs up
and copy, read as "it was right") is a test of the reviewer's verdict:

* precision = reviewer agrees among the traces with the signal (wrong, for a negative signal);
* recall    = traces with the signal among those the reviewer judged so.

Each with its 95% Wilson interval on the reviewed items and, re-weighted by each item's 1/π (the blind
sample's rate times the app's sample rate, and the day's capacity), for the population. Below `min_labels`
items with the signal, or of the verdict it predicts, the report says "label more" for that signal instead
of a reading.

The reviewer's verdict: wrong when `faithful` is false or a reason other than `other` was given; right when
`faithful` is true with no reason; an item with neither is no verdict and left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service.contracts.vocabulary import IMPLICIT_SIGNALS, POSITIVE_SIGNALS
from service.review.refusals import rate_with_intervals

DEFAULT_MIN_LABELS = 30


@dataclass(frozen=True)
class SignalItem:
    item: str
    wrong: bool  # the reviewer's verdict
    signals: frozenset[str]
    weight: float = 1.0  # 1/π
    stratum: str = "blind"


def verdict(faithful: bool | None, reason: str | None) -> bool | None:
    """True (wrong), False (right) or None (no verdict) from a review label."""
    if faithful is False or (reason and reason != "other"):
        return True
    if faithful is True and not reason:
        return False
    return None


def _reading(items: Sequence[SignalItem], signal: str, min_labels: int) -> dict[str, Any]:
    predicts_wrong = signal not in POSITIVE_SIGNALS
    flagged = [i for i in items if signal in i.signals]
    target = [i for i in items if i.wrong == predicts_wrong]
    precision = rate_with_intervals(
        [i.wrong == predicts_wrong for i in flagged],
        [i.weight for i in flagged],
        [i.stratum for i in flagged],
    )
    recall = rate_with_intervals(
        [signal in i.signals for i in target], [i.weight for i in target], [i.stratum for i in target]
    )
    enough = len(flagged) >= min_labels and len(target) >= min_labels
    return {
        "signal": signal,
        "predicts": "wrong" if predicts_wrong else "right",
        "with_signal": len(flagged),
        "of_verdict": len(target),
        "precision": precision,
        "recall": recall,
        "verdict": "reading" if enough else "label_more",
        "message": ""
        if enough
        else (
            f"label more: {len(flagged)} labelled traces with {signal} and {len(target)} judged "
            f"{'wrong' if predicts_wrong else 'right'}; each needs at least {min_labels}"
        ),
    }


def signal_report(items: Sequence[SignalItem], min_labels: int = DEFAULT_MIN_LABELS) -> dict[str, Any]:
    wrong = sum(i.wrong for i in items)
    return {
        "kind": "signals",
        "n": len(items),
        "wrong": wrong,
        "right": len(items) - wrong,
        "min_labels": min_labels,
        "signals": [_reading(items, s, min_labels) for s in IMPLICIT_SIGNALS],
    }
