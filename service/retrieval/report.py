"""Labelled traces in, the retrieval-quality table out (`ragmon retrieval report`).

Input: JSON lines, one labelled trace each. ragmon's own format:

    {"tenant": "acme", "trace_id": "t-1", "intent": "billing", "variant": "b", "release": "2026.12",
     "retrieved_ids": ["d7", "d2", "d9"],       # candidates, in the order the retriever ranked them
     "context_ids": ["d2", "d7"],               # what the generator was given, in prompt order
     "gold_ids": ["d2"],                        # or "gold": {"d2": 2, "d5": 1} (graded)
     "not_entitled_ids": ["d5"]}                # optional: ids that violate entitlement

The golden-set export (`ragmon golden export`, service/review/golden.py) is
read as it is: its `documents` (the context, in prompt order) give the
context ids, its `candidates`, when present, the retrieved ids, and its
`gold_ids` the gold. Where a line has no retrieved list the retrieved stage
has no data (it is not taken to be the context); likewise for the context.
intent, variant and release are read where present; a missing one groups as
"-".

Lines of another tenant are skipped (and counted); a line that is not a JSON
object, has no gold field or has a list that is not a list of ids is an
error naming its line number.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from service.contracts.ranking import (
    DEFAULT_KS,
    STAGES,
    TRACE_METRICS,
    GoldSet,
    Judged,
    batch_metrics,
    column_names,
    gold_set,
    metric_names,
)
from service.retrieval.aggregate import DEFAULT_OPTIONS, BootstrapOptions, Estimate, estimate_group

GROUP_FIELDS: tuple[str, ...] = ("intent", "variant", "release")
MISSING = "-"
ALL = "*"
STAGE_TITLES = {"retrieved": "retrieved candidates", "context": "context given to the generator"}
TRACE_TITLES = {
    "dropped": "dropped: gold among the candidates, not in the context (reranker/packer)",
    "missed": "missed: no gold among the candidates (retriever)",
}
_NAMES = {"hit": "Hit", "recall": "Recall", "precision": "Precision", "ndcg": "nDCG", "mrr": "MRR"}


class InputError(ValueError):
    pass


@dataclass(frozen=True)
class LabelledTrace:
    tenant: str
    group: tuple[str, ...]  # intent, variant, release
    retrieved: list[str] | None
    context: list[str] | None
    gold: GoldSet
    trace_id: str | None = None


def _ids(value: Any, what: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise InputError(f"{what} must be a list")
    out = []
    for item in value:
        if isinstance(item, dict):  # the golden export's documents: {"id": ..., "text": ...}
            item = item.get("id")
        if not isinstance(item, str | int) or isinstance(item, bool):
            raise InputError(f"{what} must hold ids (strings), not {item!r}")
        out.append(str(item))
    return out


def parse_trace(obj: Any) -> LabelledTrace:
    if not isinstance(obj, dict):
        raise InputError("a line must be a JSON object")
    retrieved = _ids(obj.get("retrieved_ids", obj.get("candidates")), "retrieved_ids")
    context = _ids(obj.get("context_ids", obj.get("documents")), "context_ids")
    if retrieved is None and context is None:
        raise InputError("neither retrieved_ids nor context_ids (nor the export's documents)")
    not_entitled = _ids(obj.get("not_entitled_ids"), "not_entitled_ids") or []
    if isinstance(obj.get("gold"), dict):
        grades = obj["gold"]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in grades.values()):
            raise InputError("gold grades must be numbers")
        gold = gold_set({str(k): float(v) for k, v in grades.items()}, not_entitled)
    elif "gold_ids" in obj or "gold" in obj:
        gold = gold_set(_ids(obj.get("gold_ids", obj.get("gold")), "gold_ids") or [], not_entitled)
    else:
        raise InputError("no gold_ids (or gold) field: not a labelled trace")
    group = tuple(str(obj.get(f) or MISSING) for f in GROUP_FIELDS)
    trace_id = obj.get("trace_id")
    return LabelledTrace(str(obj.get("tenant", "")), group, retrieved, context, gold, trace_id)


@dataclass
class ReadResult:
    traces: list[LabelledTrace]
    other_tenants: int = 0


def read_traces(lines: Iterable[str], tenant: str) -> ReadResult:
    result = ReadResult([])
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            trace = parse_trace(json.loads(line))
        except (json.JSONDecodeError, InputError) as exc:
            raise InputError(f"line {number}: {exc}") from None
        if trace.tenant != tenant:
            result.other_tenants += 1
            continue
        result.traces.append(trace)
    return result


def _estimate_json(e: Estimate) -> dict[str, Any]:
    return {"mean": e.mean, "low": e.low, "high": e.high, "n": e.n, "status": e.status}


def build_report(
    traces: Sequence[LabelledTrace],
    tenant: str,
    ks: Sequence[int] = DEFAULT_KS,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    other_tenants: int = 0,
) -> dict[str, Any]:
    """The report as a JSON-able dict: one entry per (intent, variant, release), plus all of the tenant's."""
    ks = tuple(ks)
    names = column_names(ks)
    labelled = [t for t in traces if t.gold]
    columns = batch_metrics([Judged(t.retrieved, t.context, t.gold) for t in labelled], ks)
    values = np.column_stack([columns[name] for name in names]) if labelled else np.empty((0, len(names)))
    members: dict[tuple[str, ...], list[int]] = {}
    for i, t in enumerate(labelled):
        members.setdefault(t.group, []).append(i)
    every: dict[tuple[str, ...], list[LabelledTrace]] = {}
    for t in traces:
        every.setdefault(t.group, []).append(t)
    keys = sorted(every)
    groups = []
    plan = [((ALL,) * len(GROUP_FIELDS), list(range(len(labelled))), list(traces))] if len(keys) > 1 else []
    plan += [(key, members.get(key, []), every[key]) for key in keys]
    for key, rows, all_traces in plan:
        estimates = estimate_group(values[rows], (tenant, *key), options)
        by_name = dict(zip(names, estimates, strict=True))
        groups.append(
            {
                **dict(zip(GROUP_FIELDS, key, strict=True)),
                "traces": len(all_traces),
                "labelled": len(rows),
                "no_gold": len(all_traces) - len(rows),
                "gold_not_entitled": sum(t.gold.not_entitled for t in all_traces),
                "stages": {
                    stage: {m: _estimate_json(by_name[f"{stage}.{m}"]) for m in metric_names(ks)}
                    for stage in STAGES
                },
                "trace": {m: _estimate_json(by_name[m]) for m in TRACE_METRICS},
            }
        )
    return {
        "tenant": tenant,
        "k": list(ks),
        "resamples": options.resamples,
        "confidence": options.confidence,
        "min_n": options.min_n,
        "seed": options.seed,
        "traces": len(traces),
        "other_tenants_skipped": other_tenants,
        "groups": groups,
    }


def _title(name: str) -> str:
    metric, _, k = name.partition("@")
    return f"{_NAMES[metric]}@{k}" if k else _NAMES[metric]


def format_estimate(e: dict[str, Any], min_n: int) -> str:
    if e["status"] == "no data":
        return "no data"
    if e["status"] != "ok":
        return f"{e['mean']:.3f} (label more: n < {min_n})"
    return f"{e['mean']:.3f} [{e['low']:.3f}, {e['high']:.3f}]"


def render_markdown(report: dict[str, Any]) -> str:
    pct = f"{report['confidence']:.0%}"
    lines = [
        f"# Retrieval quality: tenant {report['tenant']}",
        "",
        f"{report['traces']} traces read"
        + (
            f" ({report['other_tenants_skipped']} of other tenants skipped)"
            if report["other_tenants_skipped"]
            else ""
        )
        + f". Means with {pct} percentile bootstrap intervals ({report['resamples']} resamples, seed "
        f"{report['seed']}); n: traces with gold and that stage's list; below n = {report['min_n']}: "
        "label more. Traces without gold are not counted.",
    ]
    min_n = report["min_n"]
    for g in report["groups"]:
        key = ", ".join(f"{f} {g[f]}" for f in GROUP_FIELDS)
        lines += [
            "",
            f"## {'all traces' if all(g[f] == ALL for f in GROUP_FIELDS) else key}",
            "",
            f"{g['traces']} traces, {g['labelled']} with gold, {g['no_gold']} without (not counted); "
            f"{g['gold_not_entitled']} gold ids not entitled (left out).",
            "",
            f"| metric | {STAGE_TITLES['retrieved']} | n | {STAGE_TITLES['context']} | n |",
            "|---|---:|---:|---:|---:|",
        ]
        for name in metric_names(report["k"]):
            cells = []
            for stage in STAGES:
                e = g["stages"][stage][name]
                cells += [format_estimate(e, min_n), str(e["n"])]
            lines.append(f"| {_title(name)} | " + " | ".join(cells) + " |")
        lines.append("")
        for name in TRACE_METRICS:
            e = g["trace"][name]
            lines.append(f"- {TRACE_TITLES[name]}: {format_estimate(e, min_n)}, n = {e['n']}")
    return "\n".join(lines) + "\n"


def report_file(
    path: str | Path,
    tenant: str,
    ks: Sequence[int] = DEFAULT_KS,
    options: BootstrapOptions = DEFAULT_OPTIONS,
) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        read = read_traces(f, tenant)
    return build_report(read.traces, tenant, ks, options, read.other_tenants)
