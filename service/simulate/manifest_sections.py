"""Manifest sections that need more than a count: exclusion truth, quality, latency by phase."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from service.simulate.records import TraceFacts

EXCLUSION_COUNTS = (
    "queries",
    "eligible_queries",
    "excluded_queries",
    "eligible_gold_docs",
    "excluded_gold_docs",
    "ineligible_gold_docs",
)
LATENCY_KEYS = ("retrieval", "rerank", "generation", "postprocess", "ttft", "total")


def gold_source(trace: TraceFacts, labelled: set[str]) -> str:
    """Where a worker would get gold from: the sample's gold_ids, a later label, or its score proxy."""
    if trace.gold_in_sample:
        return "sample"
    if trace.event_id in labelled:
        return "label"
    return "proxy"


def _empty() -> dict[str, Any]:
    return dict.fromkeys(EXCLUSION_COUNTS, 0) | {"excluded_by_field": Counter()}


def _add(acc: dict[str, Any], trace: TraceFacts) -> None:
    truth = trace.exclusion
    acc["queries"] += 1
    acc["eligible_queries"] += truth.has_eligible_gold
    acc["excluded_queries"] += truth.excluded_query
    acc["eligible_gold_docs"] += truth.eligible_gold
    acc["excluded_gold_docs"] += truth.excluded_gold
    acc["ineligible_gold_docs"] += truth.ineligible_gold
    acc["excluded_by_field"].update(truth.excluded_by_field)


def _finish(acc: dict[str, Any]) -> dict[str, Any]:
    eligible = acc["eligible_queries"]
    docs = acc["eligible_gold_docs"]
    return acc | {
        "excluded_by_field": dict(sorted(acc["excluded_by_field"].items())),
        # No eligible gold is missing evidence, not a 0% rate.
        "rate": acc["excluded_queries"] / eligible if eligible else None,
        "doc_rate": acc["excluded_gold_docs"] / docs if docs else None,
    }


def exclusion_section(traces: list[TraceFacts], labelled: set[str]) -> dict[str, Any]:
    """False-exclusion truth per phase and variant: over sampled traces (what a worker sees) and all traces."""
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    by_phase: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for t in traces:
        if t.error is not None:  # a failed request's sample is not evaluated (docs/errors.md)
            continue
        scopes = by_phase.setdefault(t.phase, {}).setdefault(
            t.variant, {"sampled": _empty(), "all": _empty()}
        )
        _add(scopes["all"], t)
        if not t.sampled:
            continue
        _add(scopes["sampled"], t)
        key = (t.phase, t.tenant, t.variant, t.intent, gold_source(t, labelled))
        _add(rows.setdefault(key, _empty()), t)
    return {
        "rows": [
            dict(zip(("phase", "tenant", "variant", "intent", "gold_source"), key, strict=True))
            | _finish(acc)
            for key, acc in sorted(rows.items())
        ],
        "by_phase": {
            phase: {
                variant: {scope: _finish(acc) for scope, acc in scopes.items()}
                for variant, scopes in sorted(v.items())
            }
            for phase, v in sorted(by_phase.items())
        },
    }


def quality_section(traces: list[TraceFacts]) -> dict[str, Any]:
    by_phase: dict[str, dict[str, Counter[str]]] = {}
    leaks: Counter[str] = Counter()
    for t in traces:
        c = by_phase.setdefault(t.phase, {}).setdefault(t.variant, Counter())
        c["traces"] += 1
        if t.error is not None:  # a failed request: in no quality count (docs/errors.md)
            c["errored"] += 1
            continue
        c["refused"] += t.refused
        c["no_claims"] += t.faithful is None
        c["faithful"] += t.faithful is True
        c["unfaithful"] += t.faithful is False
        c["gold_in_context"] += t.gold_in_context
        c["off_topic"] += t.off_topic
        c["leaks"] += t.leak
        leaks[t.tenant] += t.leak
    return {
        "by_phase": {
            p: {v: dict(sorted(c.items())) for v, c in sorted(vs.items())}
            for p, vs in sorted(by_phase.items())
        },
        "leaks_by_tenant": {k: n for k, n in sorted(leaks.items()) if n},
    }


def _summary(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values)
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {
        "count": len(values),
        "mean": round(float(arr.mean()), 3),
        "p50": round(float(p50), 3),
        "p95": round(float(p95), 3),
        "p99": round(float(p99), 3),
        "max": round(float(arr.max()), 3),
    }


def latency_section(traces: list[TraceFacts]) -> dict[str, Any]:
    """Milliseconds per stage by phase and variant (linear-interpolated percentiles)."""
    grouped: dict[str, dict[str, dict[str, list[float]]]] = {}
    for t in traces:
        if t.error is not None:  # latency is about answers served: failed requests are errors
            continue
        stages = grouped.setdefault(t.phase, {}).setdefault(t.variant, {k: [] for k in LATENCY_KEYS})
        for k in LATENCY_KEYS:
            stages[k].append(t.timings[k])
    return {
        "by_phase": {
            phase: {
                variant: {k: _summary(v) for k, v in stages.items()} for variant, stages in sorted(vs.items())
            }
            for phase, vs in sorted(grouped.items())
        },
    }


def usage_by_phase(traces: list[TraceFacts]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for t in traces:
        entry = out.setdefault(
            t.phase,
            {
                "traces": 0,
                "traces_with_cost": 0,
                "cost_usd_reported": 0.0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
            },
        )
        entry["traces"] += 1
        entry["prompt_tokens"] += t.tokens.get("prompt", 0)
        entry["completion_tokens"] += t.tokens.get("completion", 0)
        if t.cost_usd is not None:
            entry["traces_with_cost"] += 1
            entry["cost_usd_reported"] += t.cost_usd
    return {p: {**e, "cost_usd_reported": round(e["cost_usd_reported"], 9)} for p, e in sorted(out.items())}
