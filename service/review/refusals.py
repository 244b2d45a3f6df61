"""Refusals against reviewers' `answerable` labels: false refusals, false answers, and the threshold trade-off.

Two errors, each a rate of its own class of questions (so a mix with few unanswerable questions cannot
hide the second):

* false refusal rate = refused answers among the questions reviewers marked answerable;
* false answer rate = answers given (not refused) among the questions reviewers marked not answerable.

Each comes with its 95% Wilson interval on the reviewed mix and, re-weighted by each item's 1/π, for the
population (the review strata oversample thumbs-down and low-confidence traces). Below `min_labels` in
either class the report says so instead of a verdict.

The trade-off (a gate that refuses before calling the model when the retrieval's confidence is low): with
a confidence on the trace (the best score among the documents given to the generator), refusing when it
is under a threshold t gives

    false refusals(t) = answerable with confidence < t / answerable
    false answers(t)  = not answerable with confidence ≥ t / not answerable

Raising t trades false answers for false refusals. The suggested threshold is the lowest t whose false
answer rate is at most the configured ceiling, chosen on one half of the items (the hash split of
service/review/calibrate.py) and reported on the other half with intervals, so the choice does not
flatter its own figures; the verdict says whether the held-out interval's upper end meets the ceiling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service.review.calibrate import in_selection_half
from service.review.stats import weighted_share, wilson

DEFAULT_MAX_FALSE_ANSWERS = 0.05
DEFAULT_MIN_LABELS = 30
TRADEOFF_ROWS = 11  # thresholds shown: the confidence quantiles 0, 0.1, …, 1


@dataclass(frozen=True)
class RefusalItem:
    item: str  # the trace id: fixes the item's half
    refused: bool
    answerable: bool  # the reviewer's label
    confidence: float | None = None  # best retrieval score of the context; None when the trace had none
    weight: float = 1.0  # 1/π
    stratum: str = ""


def rate_with_intervals(
    hits: Sequence[bool], weights: Sequence[float], strata: Sequence[str]
) -> dict[str, Any]:
    """A rate with its Wilson interval on the reviewed mix and its population (1/π) estimate."""
    n, k = len(hits), sum(hits)
    interval = wilson(k, n)
    population = weighted_share(hits, weights, strata) if n else None
    return {
        "count": k,
        "n": n,
        "value": k / n if n else None,
        "interval": None if interval is None else {"low": interval.low, "high": interval.high},
        "population": None
        if population is None or population.value is None
        else {
            "value": population.value,
            "interval": None
            if population.interval is None
            else {"low": population.interval.low, "high": population.interval.high},
            "effective_n": population.effective_n,
        },
    }


def error_rates(items: Sequence[RefusalItem]) -> dict[str, Any]:
    """The app's own refusals against the labels."""
    yes = [i for i in items if i.answerable]
    no = [i for i in items if not i.answerable]
    return {
        "false_refusals": rate_with_intervals(
            [i.refused for i in yes], [i.weight for i in yes], [i.stratum for i in yes]
        ),
        "false_answers": rate_with_intervals(
            [not i.refused for i in no], [i.weight for i in no], [i.stratum for i in no]
        ),
    }


def at_threshold(threshold: float, items: Sequence[RefusalItem]) -> dict[str, Any]:
    """The gate `refuse when confidence < threshold` on items that carry a confidence."""
    scored = [i for i in items if i.confidence is not None]
    yes = [i for i in scored if i.answerable]
    no = [i for i in scored if not i.answerable]
    return {
        "threshold": threshold,
        "false_refusals": rate_with_intervals(
            [i.confidence is not None and i.confidence < threshold for i in yes],
            [i.weight for i in yes],
            [i.stratum for i in yes],
        ),
        "false_answers": rate_with_intervals(
            [i.confidence is not None and i.confidence >= threshold for i in no],
            [i.weight for i in no],
            [i.stratum for i in no],
        ),
    }


def _rate(items: Sequence[RefusalItem], threshold: float, answerable: bool) -> float | None:
    group = [i.confidence for i in items if i.confidence is not None and i.answerable == answerable]
    if not group:
        return None
    if answerable:
        return sum(c < threshold for c in group) / len(group)
    return sum(c >= threshold for c in group) / len(group)


def best_threshold(items: Sequence[RefusalItem], max_false_answers: float) -> float | None:
    """The lowest threshold (fewest false refusals) whose false-answer rate is at most the ceiling; None
    without both classes. Candidates: every confidence seen, and just above the largest (refuse all)."""
    confidences = sorted({i.confidence for i in items if i.confidence is not None})
    if not confidences or _rate(items, confidences[0], False) is None or _rate(items, 0.0, True) is None:
        return None
    candidates = [*confidences, confidences[-1] + 1e-9]
    for t in candidates:  # false answers fall as t rises: the first that meets the ceiling
        rate = _rate(items, t, False)
        if rate is not None and rate <= max_false_answers:
            return t
    return None


def _quantiles(values: Sequence[float], rows: int) -> list[float]:
    ordered = sorted(values)
    picks = {ordered[round(k * (len(ordered) - 1) / (rows - 1))] for k in range(rows)}
    return sorted(picks)


def refusal_report(
    items: Sequence[RefusalItem],
    max_false_answers: float = DEFAULT_MAX_FALSE_ANSWERS,
    min_labels: int = DEFAULT_MIN_LABELS,
) -> dict[str, Any]:
    n_yes = sum(i.answerable for i in items)
    n_no = len(items) - n_yes
    report: dict[str, Any] = {
        "kind": "refusals",
        "n": len(items),
        "answerable": n_yes,
        "not_answerable": n_no,
        "min_labels": min_labels,
        "max_false_answers": max_false_answers,
        "app": error_rates(items),
    }
    scored = [i for i in items if i.confidence is not None]
    report["with_confidence"] = len(scored)
    report["tradeoff"] = (
        [
            at_threshold(t, scored)
            for t in _quantiles([i.confidence for i in scored if i.confidence is not None], TRADEOFF_ROWS)
        ]
        if scored
        else []
    )
    selection = [i for i in scored if in_selection_half(i.item)]
    heldout = [i for i in scored if not in_selection_half(i.item)]
    report["n_selection"], report["n_heldout"] = len(selection), len(heldout)
    if n_yes < min_labels or n_no < min_labels:
        report["verdict"] = "label_more"
        report["suggested"] = None
        report["message"] = (
            f"label more: {n_yes} answerable and {n_no} not answerable labelled; each class needs at least "
            f"{min_labels} before the rates mean anything"
        )
        return report
    if not scored:
        report["verdict"] = "no_confidence"
        report["suggested"] = None
        report["message"] = (
            "the traces carry no retrieval score: the error rates above are the app's own; no threshold to tune"
        )
        return report
    chosen = best_threshold(selection, max_false_answers)
    if chosen is None:
        report["verdict"] = "label_more" if not selection else "no_threshold"
        report["suggested"] = None
        report["message"] = (
            f"no threshold keeps false answers at or under {max_false_answers:g} on the selection half "
            f"({len(selection)} items, both classes needed)"
        )
        return report
    figures = at_threshold(chosen, heldout)
    high = (figures["false_answers"]["interval"] or {}).get("high")
    report["suggested"] = figures
    report["verdict"] = "meets" if high is not None and high <= max_false_answers else "uncertain"
    fr = figures["false_refusals"]["value"]
    report["message"] = (
        f"refuse below {chosen:.3f}: chosen on {len(selection)}, checked on {len(heldout)}; held-out false "
        f"refusals {'no data' if fr is None else f'{fr:.3f}'}, false answers' upper bound "
        f"{'no data' if high is None else f'{high:.3f}'} against the ceiling {max_false_answers:g}"
        + ("" if report["verdict"] == "meets" else ": label more unanswerable questions to be sure")
    )
    return report
