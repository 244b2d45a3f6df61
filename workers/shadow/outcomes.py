"""What one trace or score event contributes to a pair, and a pair's outcomes per metric (pure).

A trace gives latency per stage and total, cost, tokens, refusal, an uncited
answer and its slice labels (a failed request, one with an `error`, gives none
of them: only its slice labels); a faithfulness score event gives the score and
whether it clears the tenant's threshold; an exclusion result gives whether
the query was falsely excluded. Each is stored as a small JSON field of the
request's Redis hash, so a pair is rebuilt from whatever has arrived.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from service.contracts.scores import ExclusionResultEvent, FaithfulnessScoreEvent
from workers.shadow.config import ShadowConfig
from workers.shadow.views import ShadowTrace

OTHER = "other"


def trace_outcome(body: ShadowTrace, config: ShadowConfig) -> dict[str, Any]:
    if body.error is not None:  # a failed request has no latency, refusal or cost to compare: every metric
        # of its pair is missing on this side, so an outage of one variant never reads as its quality
        return {
            "lat": {},
            "refused": None,
            "uncited": None,
            "tokens": None,
            "cost": None,
            "slices": _slices(body, config),
        }
    timings = body.timings
    answer = body.answer
    answered = not answer.refused and bool(answer.text.strip())
    out: dict[str, Any] = {
        "lat": {stage: timings[stage] / 1000.0 for stage in config.stages if stage in timings},
        "refused": 1.0 if answer.refused else 0.0,
        "uncited": (0.0 if answer.citations else 1.0) if answered else None,
        "tokens": float(sum(body.usage.tokens.values())) if body.usage.tokens else None,
        "cost": body.usage.cost_usd,
        "slices": _slices(body, config),
    }
    if "total" in timings:
        out["lat"]["total"] = timings["total"] / 1000.0
    return out


def _slices(body: ShadowTrace, config: ShadowConfig) -> dict[str, str]:
    """Slice labels from closed sets: a value outside the configured list is 'other'."""
    labels = {}
    if body.intent is not None:
        labels["intent"] = body.intent if body.intent in config.intents else OTHER
    for predicate in body.retrieval.filters.relevance:
        allowed = config.slice_fields.get(predicate.field)
        if allowed is not None and predicate.op == "eq":
            labels[predicate.field] = str(predicate.value) if str(predicate.value) in allowed else OTHER
    return labels


def faithfulness_outcome(event: FaithfulnessScoreEvent) -> dict[str, Any]:
    if event.outcome != "scored" or event.score is None:
        return {"score": None, "faithful": None}  # no claims: not a perfect score, not a failure
    return {"score": event.score, "faithful": 0.0 if event.below_threshold else 1.0}


def exclusion_outcome(event: ExclusionResultEvent) -> dict[str, Any]:
    excluded = event.falsely_excluded
    return {"excluded": None if excluded is None else float(excluded)}


def _nan(x: Any) -> float:
    return math.nan if x is None else float(x)


def variant_values(fields: dict[str, bytes], variant: str) -> dict[str, float]:
    """One variant's outcomes per metric name, from the request hash fields."""
    values: dict[str, float] = {}
    trace = fields.get(f"trace:{variant}")
    if trace is not None:
        t = orjson.loads(trace)
        for stage, seconds in t["lat"].items():
            values[f"latency_{stage}_seconds"] = float(seconds)
        values["refusal"] = _nan(t["refused"])
        values["uncited_answer"] = _nan(t["uncited"])
        values["tokens_total"] = _nan(t["tokens"])
        values["cost_usd"] = _nan(t["cost"])
    faith = fields.get(f"faith:{variant}")
    if faith is not None:
        f = orjson.loads(faith)
        values["faithfulness_score"] = _nan(f["score"])
        values["faithful"] = _nan(f["faithful"])
    excl = fields.get(f"excl:{variant}")
    if excl is not None:
        values["false_exclusion"] = _nan(orjson.loads(excl)["excluded"])
    return values


def pair_row(
    fields: dict[str, bytes], candidate: str
) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    """(production outcomes, candidate outcomes, slice labels of the production trace)."""
    prod = variant_values(fields, "production")
    cand = variant_values(fields, candidate)
    trace = fields.get("trace:production")
    labels = orjson.loads(trace)["slices"] if trace is not None else {}
    return prod, cand, labels
