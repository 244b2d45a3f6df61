"""Render a Comparison as markdown (people) or JSON (machines); same numbers either way."""

from __future__ import annotations

import json
import math
from typing import Any

from workers.shadow.results import Comparison, MetricResult, SliceResult


def render(comparison: Comparison, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(comparison.to_dict(), indent=2, sort_keys=True)
    if fmt == "md":
        return render_markdown(comparison)
    raise ValueError(f"--format: {fmt!r} is not one of md, json")


def _num(x: float | None, fmt: str = "+.3f") -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return format(x, fmt)


def _metric_row(r: MetricResult) -> str:
    p95 = (
        f" p95 ×{_num(r.p95_ratio, '.2f')} [{_num(r.p95_ratio_lower, '.2f')}, {_num(r.p95_ratio_upper, '.2f')}]"
        if r.p95_ratio is not None
        else ""
    )
    return (
        f"| {r.metric} | {r.n} | {_num(r.production_mean, '.3f')} | {_num(r.candidate_mean, '.3f')} | "
        f"{_num(r.delta)} | {r.wins}/{r.losses}/{r.ties} | {_num(r.sign_p, '.3f')} ({_num(r.sign_p_holm, '.3f')}) | "
        f"[{_num(r.bootstrap_lower)}, {_num(r.bootstrap_upper)}]{p95} | [{_num(r.cs_lower)}, {_num(r.cs_upper)}] | "
        f"{_num(r.anytime_p_holm, '.3f')} | **{r.verdict}** ({r.reason}) | {_num(r.detectable_effect, '.3f')} | "
        f"{_num(r.pairs_needed, ',.0f')} |"
    )


def _slice_row(s: SliceResult) -> str:
    flag = f"masked regression ({s.strength}, n={s.n})" if s.masked_regression else ""
    return (
        f"| {s.dimension}={s.value} | {s.metric} | {s.n} | {s.wins}/{s.losses}/{s.ties} | {_num(s.delta)} | "
        f"[{_num(s.bootstrap_lower)}, {_num(s.bootstrap_upper)}] | {_num(s.sign_p, '.3f')} | {flag} |"
    )


def _context_lines(c: Comparison) -> list[str]:
    """Coverage and production latency (live reports), as bullets under the title."""
    details = {k: v for k, v in c.context.items() if "." in k}
    lines = [
        f"- {k}: {'no data' if v is None else _num(v, '.3f') if isinstance(v, float) else v}"
        for k, v in details.items()
    ]
    return [*lines, ""] if lines else []


def coverage_lines(context: dict[str, Any]) -> list[str]:
    """The coverage against the configured shadow rate, in words (live reports)."""
    if "coverage.pairs" not in context:
        return []
    get = context.get
    if get("coverage.coverage") is None:
        return ["**Coverage**: no data (no production traces since the candidate's first event).", ""]
    conf = get("coverage.confidence", 0.999)
    line = (
        f"**Coverage**: {get('coverage.coverage'):.1%} of {get('coverage.production_traces'):,} production "
        f"requests have a twin ({get('coverage.pairs'):,} pairs), {conf:.1%} exact binomial interval "
        f"[{get('coverage.lower'):.1%}, {get('coverage.upper'):.1%}]; "
    )
    expected = get("coverage.expected_coverage")
    if expected is None:
        line += "no shadow rate configured (expected_shadow_rate) to check it against."
    elif get("coverage.coverage_off"):
        line += (
            f"configured shadow rate {expected:.1%}: **FAR OFF** (outside the interval): pairs are being "
            "lost, or the app shadows another share than configured."
        )
    else:
        line += f"configured shadow rate {expected:.1%}: consistent."
    return [line, ""]


def render_markdown(c: Comparison) -> str:
    head = ", ".join(f"{k} {v}" for k, v in c.context.items() if "." not in k)
    lines = [
        f"# Shadow comparison{': ' + head if head else ''}",
        "",
        *coverage_lines(c.context),
        *_context_lines(c),
        f"{c.pairs} pairs; alpha {c.alpha}. Verdicts use the anytime-valid confidence sequence with Holm's "
        "correction across metrics; the sign test and bootstrap are fixed-n and shown for reference.",
        "",
        "| metric | n | production | candidate | Δ | wins/losses/ties | sign p (Holm) | bootstrap 95% | "
        "anytime CS | anytime p (Holm) | verdict | detectable at 80% | pairs needed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_metric_row(r) for r in c.metrics]
    if c.masked_regressions:
        lines += ["", "## Regressions hidden by the average", ""]
        lines += [
            f"- {s.metric} in {s.dimension}={s.value}: {s.losses} losses / {s.wins} wins over {s.n} pairs, "
            f"Δ {_num(s.delta)} — {'a lead to follow: add pairs of this slice' if s.strength == 'lead' else 'worse with its interval excluding 0'}"
            for s in c.masked_regressions
        ]
    if c.slices:
        lines += [
            "",
            "## Slices",
            "",
            "| slice | metric | n | wins/losses/ties | Δ | bootstrap 95% | sign p | flag |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [_slice_row(s) for s in c.slices]
    return "\n".join(lines) + "\n"
