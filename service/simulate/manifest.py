"""The manifest: ground truth of a run, aggregated from the ledger.

Counts cover the events in the basis: those the API accepted when sending,
every generated event when only generating. Tests of workers compare their
metrics with these numbers, so everything is an exact count over the basis.

Top-level keys: format, basis, scenario, run (mode, start = timestamp of
scenario second 0, ...), http (statuses, retries, latency), events (sent /
accepted / rejected / failed by type, by_type_tenant, errors), traces (by
tenant, variant, intent, release, phase; rows per tenant x variant x intent of
answered traces, errors per tenant x variant x intent x stage x type of failed
ones, finish_reasons; refused; usage: tokens by kind, reported cost, by model and by phase),
feedback (by kind, by kind and reason, before_trace, late, rows joined to the
trace's tenant/variant/release/intent), labels, releases, phases (trace ids
per phase and variant), incidents (their windows in seconds and RFC 3339),
exclusion (false-exclusion truth: rows and by_phase, over sampled traces and
all traces), quality (faithful/unfaithful/no_claims/leaks by phase), latency
(per-stage summaries by phase). A phase is "clean" or the names of the
incidents active for that request joined by "+".
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from service.simulate.ledger import ACCEPTED, FAILED, REJECTED, Ledger
from service.simulate.manifest_sections import (
    exclusion_section,
    latency_section,
    quality_section,
    usage_by_phase,
)
from service.simulate.records import FeedbackFacts, LabelFacts, ReleaseFacts, TraceFacts, rfc3339
from service.simulate.scenario import Scenario

FORMAT_VERSION = 1


def _nested(counter: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for (outer, inner), n in sorted(counter.items()):
        out[outer][inner] = n
    return dict(out)


def _rows(counter: Counter[tuple[Any, ...]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    return [dict(zip(keys, key, strict=True)) | {"count": n} for key, n in sorted(counter.items(), key=str)]


def traces_section(traces: list[TraceFacts]) -> dict[str, Any]:
    reported = [t.cost_usd for t in traces if t.cost_usd is not None]
    tokens: Counter[str] = Counter()
    embeddings: dict[str, dict[str, int]] = {}
    reweighted: dict[str, float] = defaultdict(float)
    for t in traces:
        tokens.update(t.tokens)
        reweighted[t.tenant] += 1.0 / t.sample_rate
        if t.embedding_model is not None and t.embedding_dim is not None:
            entry = embeddings.setdefault(t.embedding_model, {"count": 0, "dim": t.embedding_dim})
            entry["count"] += 1
    return {
        "total": len(traces),
        "by_tenant": dict(sorted(Counter(t.tenant for t in traces).items())),
        "by_variant": dict(sorted(Counter(t.variant for t in traces).items())),
        "by_intent": dict(sorted(Counter(t.intent for t in traces).items())),
        "by_release": _nested(Counter((t.variant, t.release) for t in traces)),
        "by_phase": dict(sorted(Counter(t.phase for t in traces).items())),
        # answered traces (ragmon_rag_queries_total counts these; failed requests are in `errors`)
        "rows": _rows(
            Counter((t.tenant, t.variant, t.intent) for t in traces if t.error is None),
            ("tenant", "variant", "intent"),
        ),
        "errors": _rows(
            Counter((t.tenant, t.variant, t.intent, *t.error) for t in traces if t.error is not None),
            ("tenant", "variant", "intent", "stage", "type"),
        ),
        "finish_reasons": _rows(
            Counter(
                (t.tenant, t.variant, t.intent, t.finish_reason)
                for t in traces
                if t.finish_reason is not None
            ),
            ("tenant", "variant", "intent", "reason"),
        ),
        "refused": sum(t.refused for t in traces),
        "without_citations": sum(not t.cited for t in traces),
        "reweighted_by_tenant": {k: round(v, 6) for k, v in sorted(reweighted.items())},
        "embeddings_by_model": embeddings,
        "usage": {
            "tokens": dict(sorted(tokens.items())),
            "cost_usd_reported": round(sum(reported), 9),
            "traces_with_reported_cost": len(reported),
            "traces_without_reported_cost": len(traces) - len(reported),
            "by_model": _usage_by_model(traces),
            "by_phase": usage_by_phase(traces),
        },
    }


def _usage_by_model(traces: list[TraceFacts]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in traces:
        entry = out.setdefault(t.model, {"traces": 0, "tokens": Counter(), "cost_usd_reported": 0.0})
        entry["traces"] += 1
        entry["tokens"].update(t.tokens)
        entry["cost_usd_reported"] += t.cost_usd or 0.0
    return {
        m: {**e, "tokens": dict(e["tokens"]), "cost_usd_reported": round(e["cost_usd_reported"], 9)}
        for m, e in sorted(out.items())
    }


def feedback_section(feedback: list[FeedbackFacts], trace_ids_in_basis: set[str]) -> dict[str, Any]:
    joined = Counter(
        (
            f.trace.tenant,
            f.trace.variant,
            f.trace.release,
            f.trace.intent,
            f.kind,
            f.reason or "none",
            f.trace.event_id in trace_ids_in_basis,
        )
        for f in feedback
    )
    return {
        "total": len(feedback),
        "by_kind": dict(sorted(Counter(f.kind for f in feedback).items())),
        "by_kind_reason": _nested(Counter((f.kind, f.reason or "none") for f in feedback)),
        "before_trace": sum(f.before_trace for f in feedback),
        "late": sum(f.late for f in feedback),
        "trace_not_accepted": sum(f.trace.event_id not in trace_ids_in_basis for f in feedback),
        "rows": _rows(joined, ("tenant", "variant", "release", "intent", "kind", "reason", "trace_accepted")),
    }


def labels_section(labels: list[LabelFacts]) -> dict[str, Any]:
    return {
        "total": len(labels),
        "with_gold": sum(lb.has_gold for lb in labels),
        "faithful": dict(Counter(str(lb.faithful).lower() for lb in labels)),
        "answerable": dict(Counter(str(lb.answerable).lower() for lb in labels)),
        "trace_ids": sorted(lb.trace.trace_id for lb in labels),
    }


def phases_section(
    scenario: Scenario, traces: list[TraceFacts], anchor: datetime, until: float
) -> dict[str, Any]:
    phases: dict[str, Any] = {}
    for t in sorted(traces, key=lambda t: t.at_s):
        entry = phases.setdefault(t.phase, {"traces": 0, "trace_ids": {}})
        entry["traces"] += 1
        entry["trace_ids"].setdefault(t.variant, []).append(t.trace_id)
    incidents = []
    for inc in scenario.incidents:
        windows = inc.windows(until)
        incidents.append(
            {
                **inc.model_dump(mode="json"),
                "windows": [
                    {"start_s": s, "end_s": e, "start": rfc3339(anchor, s), "end": rfc3339(anchor, e)}
                    for s, e in windows
                ],
            }
        )
    return {"phases": dict(sorted(phases.items())), "incidents": incidents}


def _events_section(ledger: Ledger, mode: str) -> dict[str, Any]:
    counts = ledger.counts()
    return {
        "sent": dict(sorted(counts["sent"].items())),
        "accepted": dict(sorted(counts["sent" if mode == "generate" else ACCEPTED].items())),
        "rejected": dict(sorted(counts[REJECTED].items())),
        "failed": dict(sorted(counts[FAILED].items())),
        "errors": dict(ledger.error_counts.most_common(50)),
        "error_samples": ledger.errors,
    }


def build_manifest(
    scenario: Scenario,
    ledger: Ledger,
    anchor: datetime,
    mode: str,
    run: dict[str, Any],
    http: dict[str, Any] | None = None,
) -> dict[str, Any]:
    head: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "basis": "generated" if mode == "generate" else "accepted",
        "scenario": {
            "name": scenario.name,
            "seed": scenario.seed,
            "duration_s": scenario.duration_s,
            "rate": scenario.rate,
            "tenants": [t.name for t in scenario.tenants],
            "variants": scenario.variants,
        },
        "run": {"mode": mode, "start": anchor.isoformat(timespec="milliseconds"), **run},
        "events": _events_section(ledger, mode),
        "http": http or {},
    }
    if not ledger.keep:
        return head | {"basis": "counts only (per-event truth not kept)"}
    basis = [e for e in ledger.entries() if mode == "generate" or e.status == ACCEPTED]
    traces = [e.facts for e in basis if isinstance(e.facts, TraceFacts)]
    feedback = [e.facts for e in basis if isinstance(e.facts, FeedbackFacts)]
    labels = [e.facts for e in basis if isinstance(e.facts, LabelFacts)]
    releases = [e.facts for e in basis if isinstance(e.facts, ReleaseFacts)]
    labelled = {lb.trace.event_id for lb in labels if lb.has_gold}
    until = (
        scenario.duration_s if scenario.duration_s is not None else max((t.at_s for t in traces), default=0.0)
    )
    head["events"]["by_type_tenant"] = _nested(Counter((e.type, e.tenant) for e in basis))
    return head | {
        "traces": traces_section(traces),
        "feedback": feedback_section(feedback, {t.event_id for t in traces}),
        "labels": labels_section(labels),
        "releases": [
            {
                "tenant": r.tenant,
                "release": r.release,
                "variant": r.variant,
                "at_s": r.at_s,
                "timestamp": rfc3339(anchor, r.at_s),
            }
            for r in sorted(releases, key=lambda r: (r.at_s, r.tenant))
        ],
        **phases_section(scenario, traces, anchor, until),
        "exclusion": exclusion_section(traces, labelled),
        "quality": quality_section(traces),
        "latency": latency_section(traces),
    }
