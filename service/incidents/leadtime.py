"""Each guardrail alert's lead time over what users reported (docs/lead-time.md).

An alert episode is a contiguous run of an alert's `firing` samples for one tenant (Prometheus' `ALERTS`
series); its pending start comes from `ALERTS_FOR_STATE`, whose value is the time the alert became active.
A user rise is a contiguous run in which a user-signal band's expression (thumbs-down, regenerate: the
feedback alerts, read without their `for:`) holds for the tenant. Each alert episode is matched to the
tenant's user rise nearest to its firing within a window: lead = rise start - firing, positive when the
alert came first, negative when users noticed first (a finding). An episode with no rise in the window has
no lead ("no user signal"); a rise with no episode in the window is a regression users saw and no
guardrail did (a finding too).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# The `guardrail` label values of the alerts that stand for what users said (the feedback bands).
USER_SIGNALS = frozenset({"thumbs_down", "regeneration", "reformulation"})
GUARDRAIL_CATEGORIES = frozenset({"guardrail", "security"})


@dataclass(frozen=True)
class Episode:
    name: str  # the alert's name (a user rise: the feedback alert whose expression held)
    tenant: str
    start: float  # unix seconds: the first firing sample (a rise: the first sample the expression held)
    end: float
    active_since: float | None = None  # when the alert went pending (ALERTS_FOR_STATE), None if unknown
    labels: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Match:
    alert: Episode
    rise: Episode | None

    @property
    def lead_s(self) -> float | None:
        """Seconds from the alert firing to the users' rise: > 0 the alert came first."""
        return None if self.rise is None else self.rise.start - self.alert.start

    @property
    def detection_lead_s(self) -> float | None:
        """The same from the alert's pending start: what the rule saw, before its `for:`."""
        if self.rise is None or self.alert.active_since is None:
            return None
        return self.rise.start - self.alert.active_since


def runs(timestamps: Iterable[float], step_s: float) -> list[tuple[float, float]]:
    """Contiguous runs of a series' sample times: a gap over 1.5 steps ends a run."""
    out: list[tuple[float, float]] = []
    start = previous = None
    for ts in sorted(timestamps):
        if previous is None or ts - previous > 1.5 * step_s:
            if start is not None and previous is not None:
                out.append((start, previous))
            start = ts
        previous = ts
    if start is not None and previous is not None:
        out.append((start, previous))
    return out


def match(
    alerts: Sequence[Episode], rises: Sequence[Episode], window_s: float
) -> tuple[list[Match], list[Episode]]:
    """Each alert episode with its tenant's rise nearest its firing within `window_s` (ties: the earlier
    rise), and the rises no episode was matched to or near."""
    by_tenant: dict[str, list[Episode]] = defaultdict(list)
    for r in rises:
        by_tenant[r.tenant].append(r)
    matches: list[Match] = []
    near: set[Episode] = set()
    for a in sorted(alerts, key=lambda e: (e.start, e.name, e.tenant)):
        candidates = [r for r in by_tenant.get(a.tenant, []) if abs(r.start - a.start) <= window_s]
        near.update(candidates)
        best = min(candidates, key=lambda r: (abs(r.start - a.start), r.start), default=None)
        matches.append(Match(a, best))
    unmatched = sorted((r for r in rises if r not in near), key=lambda e: (e.start, e.tenant))
    return matches, unmatched


@dataclass(frozen=True)
class Summary:
    alert: str
    episodes: int
    with_user_signal: int
    users_first: int
    median_lead_s: float | None
    min_lead_s: float | None
    max_lead_s: float | None


def summarize(matches: Sequence[Match]) -> list[Summary]:
    by_alert: dict[str, list[Match]] = defaultdict(list)
    for m in matches:
        by_alert[m.alert.name].append(m)
    out = []
    for name in sorted(by_alert):
        leads = [m.lead_s for m in by_alert[name] if m.lead_s is not None]
        out.append(
            Summary(
                name,
                len(by_alert[name]),
                len(leads),
                sum(1 for v in leads if v < 0),
                statistics.median(leads) if leads else None,
                min(leads) if leads else None,
                max(leads) if leads else None,
            )
        )
    return out


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "no data"
    sign = "-" if seconds < 0 else "+"
    s = abs(seconds)
    if s >= 3600:
        return f"{sign}{s / 3600:.1f} h"
    if s >= 120:
        return f"{sign}{s / 60:.0f} min"
    return f"{sign}{s:.0f} s"


def as_json(matches: Sequence[Match], unmatched: Sequence[Episode], window_s: float) -> dict[str, Any]:
    def episode(e: Episode) -> dict[str, Any]:
        return {
            "name": e.name,
            "tenant": e.tenant,
            "start": e.start,
            "end": e.end,
            "active_since": e.active_since,
        }

    return {
        "window_s": window_s,
        "summary": [s.__dict__ for s in summarize(matches)],
        "episodes": [
            {
                "alert": episode(m.alert),
                "user_rise": None if m.rise is None else episode(m.rise),
                "lead_s": m.lead_s,
                "detection_lead_s": m.detection_lead_s,
            }
            for m in matches
        ],
        "user_rises_without_alert": [episode(r) for r in unmatched],
    }


def as_markdown(matches: Sequence[Match], unmatched: Sequence[Episode], window_s: float) -> str:
    lines = [
        "# Guardrail lead time over user signals",
        "",
        f"Lead = first rise of a user signal (thumbs-down, regenerate) for the tenant minus the alert's firing, "
        f"nearest within {_fmt(window_s)[1:]}; + the alert came first, - users noticed first.",
        "",
        "| alert | episodes | with a user signal | users first | median lead | min | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summarize(matches):
        lines.append(
            f"| {s.alert} | {s.episodes} | {s.with_user_signal} | {s.users_first} | {_fmt(s.median_lead_s)} "
            f"| {_fmt(s.min_lead_s)} | {_fmt(s.max_lead_s)} |"
        )
    if not matches:
        lines.append("| (no guardrail alert fired in the range) | 0 | 0 | 0 | no data | no data | no data |")
    findings = [m for m in matches if m.lead_s is not None and m.lead_s < 0]
    if findings or unmatched:
        lines += ["", "## Findings", ""]
        for m in findings:
            assert m.rise is not None
            lines.append(
                f"- users beat {m.alert.name} for {m.alert.tenant}: {m.rise.name} rose {_fmt(m.lead_s)[1:]} "
                "before it fired"
            )
        for r in unmatched:
            lines.append(f"- {r.name} rose for {r.tenant} with no guardrail alert within the window")
    return "\n".join(lines) + "\n"
