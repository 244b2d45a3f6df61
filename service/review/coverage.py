"""What each golden set can measure: items per intent and review stratum, and the interval a metric gets.

For a binary metric (`faithful`, `answerable`, a retrieval `hit@k`) the half-width is the Wilson
interval's at the observed rate: max(p - low, high - p). For a graded one (`recall@k`, `ndcg@k`,
`mrr`) it is the percentile bootstrap's, seeded. `n_for_target` is the n at which the Wald half-width
z * sd / sqrt(n) reaches the target at the observed spread: an estimate, to plan labelling by. A set
whose half-width is above the target cannot tell a change of that size from noise on its own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from service.contracts.ranking import Judged, batch_metrics, column_names, gold_set, parse_ks
from service.contracts.stats import wilson_interval
from service.retrieval.aggregate import bootstrap_means
from service.review.split import SETS, GoldenItem, SplitError

LABEL_METRICS = ("faithful", "answerable")
DEFAULT_METRIC = "faithful"


def _ids(value: Any) -> list[str] | None:
    if not isinstance(value, list) or not value:
        return None
    return [str(v.get("id")) if isinstance(v, dict) else str(v) for v in value]


def check_metric(metric: str) -> str:
    if metric in LABEL_METRICS:
        return metric
    k = metric.partition("@")[2]
    if k.isdigit() and int(k) > 0 and metric in column_names(parse_ks(k)):
        return metric
    if metric in column_names((1,)):
        return metric
    raise SplitError(
        f"--metric: {metric!r} is not faithful, answerable or a retrieval metric such as "
        "context.recall@5, retrieved.hit@10, context.mrr"
    )


def metric_values(items: Sequence[GoldenItem], metric: str) -> np.ndarray:
    """One value per item, NaN where it has none (no agreed label, no gold, no list)."""
    if metric in LABEL_METRICS:
        labels = [i.row.get(metric) for i in items]
        return np.array([float(v) if isinstance(v, bool) else math.nan for v in labels])
    k = metric.partition("@")[2]
    ks = parse_ks(k) if k else (1,)
    judged = [
        Judged(
            _ids(i.row.get("candidates")), _ids(i.row.get("documents")), gold_set(i.row.get("gold_ids") or [])
        )
        for i in items
    ]
    return batch_metrics(judged, ks)[metric] if judged else np.array([])


def precision(
    values: np.ndarray, target: float, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    v = values[~np.isnan(values)]
    n = int(v.size)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    out: dict[str, Any] = {"n": n, "value": None, "half_width": None, "method": None}
    out |= {"sees_target": False, "n_for_target": None}
    if n == 0:
        return out
    mean = float(v.mean())
    binary = bool(np.isin(v, (0.0, 1.0)).all())
    if binary:
        low, high = wilson_interval(int(v.sum()), n, z)
        method, sd = "wilson", math.sqrt(mean * (1 - mean))
    else:
        boot = bootstrap_means(v.reshape(-1, 1), np.random.default_rng(seed), resamples)[:, 0]
        tail = (1 - confidence) / 2
        low, high = (float(q) for q in np.quantile(boot, [tail, 1 - tail]))
        method, sd = "bootstrap", float(v.std(ddof=1)) if n > 1 else 0.0
    half = max(mean - low, high - mean)
    needed = math.ceil((z * sd / target) ** 2) if sd > 0 else n
    return out | {
        "value": mean,
        "half_width": half,
        "method": method,
        "sees_target": half <= target,
        "n_for_target": needed,
    }


def coverage(
    sets: Mapping[str, Sequence[GoldenItem]],
    metric: str,
    target: float,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    rows = []
    summary = []
    for name in SETS:
        items = sets.get(name, [])
        cells = Counter((i.intent, i.stratum) for i in items)
        rows += [
            {"set": name, "intent": intent, "stratum": stratum, "n": n}
            for (intent, stratum), n in sorted(cells.items())
        ]
        p = precision(metric_values(items, metric), target, confidence, resamples, seed)
        summary.append({"set": name, "items": len(items), "sessions": len({i.session for i in items})} | p)
    return {
        "metric": metric,
        "target": target,
        "confidence": confidence,
        "cells": rows,
        "sets": summary,
    }


def _num(x: Any, fmt: str) -> str:
    return "no data" if x is None else format(x, fmt)


def render_markdown(report: Mapping[str, Any]) -> str:
    m, target = report["metric"], report["target"]
    lines = [
        "# Golden set split",
        "",
        f"## What each set can see: {m}, {report['confidence']:.0%} interval, target ±{target:g}",
        "",
        "| set | items | sessions | n with data | value | half-width | method | sees ±target | n for target |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report["sets"]:
        lines.append(
            f"| {s['set']} | {s['items']} | {s['sessions']} | {s['n']} | {_num(s['value'], '.3f')} | "
            f"{_num(s['half_width'], '.3f')} | {s['method'] or '—'} | {'yes' if s['sees_target'] else 'no'} | "
            f"{_num(s['n_for_target'], ',')} |"
        )
    lines += ["", "## Coverage: items per set, intent and review stratum", ""]
    lines += ["| set | intent | stratum | n |", "|---|---|---|---|"]
    lines += [f"| {c['set']} | {c['intent']} | {c['stratum']} | {c['n']} |" for c in report["cells"]]
    return "\n".join(lines) + "\n"
