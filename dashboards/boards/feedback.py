"""User feedback: by kind and reason, the regeneration control band, by intent and release, unjoined."""

from __future__ import annotations

from dashboards.common import Board, Limits
from dashboards.model import Override, Panel, Row, Target
from dashboards.promql import TENANT, TV, per_second, sel, share, zero_when_absent

UID = "ragmon-feedback"
FEEDBACK = "ragmon_feedback_total"
REGENERATE = 'kind="regenerate"'
SERIES = "{{tenant}} / {{variant}}"
DASHED = (("custom.lineStyle", {"fill": "dash", "dash": [10, 10]}), ("custom.fillOpacity", 0))


def _band(limits: Limits) -> Panel:
    reg = limits.guardrails.regeneration
    rate, base, half = (
        sel(f"ragmon:regeneration:{name}", TV) for name in ("rate", "baseline_rate", "band_half_width")
    )
    return Panel(
        f"Regeneration rate and its control band ({reg.window})",
        "timeseries",
        [
            Target(rate, "rate " + SERIES),
            Target(base, "baseline " + SERIES),
            Target(f"{base} + {half}", "upper " + SERIES),
            Target(f"clamp_min({base} - {half}, 0)", "lower " + SERIES),
        ],
        description=f"Share of answers regenerated over {reg.window} against p̄ ± {reg.sigmas:g}·√(p̄(1−p̄)/n), p̄ "
        f"from the {reg.baseline_window} ending {reg.baseline_offset} ago and n the current window's "
        f"traffic (alert with n ≥ {reg.min_n}). The band needs that much history.",
        unit="percentunit",
        minimum=0,
        overrides=(Override("^(upper|lower|baseline) .*", DASHED),),
        width=24,
        height=9,
    )


def _kinds() -> list[Panel]:
    traffic = per_second("ragmon_rag_queries_total", "intent", TV)
    return [
        Panel(
            "Feedback by kind",
            "timeseries",
            [Target(per_second(FEEDBACK, "kind", TV), "{{kind}}")],
            description="Joined to the trace's variant, release and intent, even when it arrived before or after "
            "the trace.",
            unit="reqps",
            stacked=True,
            width=12,
        ),
        Panel(
            "Feedback by reason",
            "timeseries",
            [Target(per_second(FEEDBACK, "reason", TV, 'reason!="none"'), "{{reason}}")],
            description="Reasons users gave (wrong, incomplete, off_topic, harmful, slow, other).",
            unit="reqps",
            stacked=True,
            width=12,
        ),
        Panel(
            "Regeneration rate by intent",
            "timeseries",
            [Target(share(per_second(FEEDBACK, "intent", TV, REGENERATE), traffic), "{{intent}}")],
            description="Regenerations over traces, per intent: which kind of question users retry.",
            unit="percentunit",
            minimum=0,
            width=12,
        ),
        Panel(
            "Feedback by release",
            "timeseries",
            [Target(per_second(FEEDBACK, "release, kind", TV), "{{release}} {{kind}}")],
            description="Compare a release's feedback mix with the one before it.",
            unit="reqps",
            width=12,
        ),
    ]


def _joins() -> list[Panel]:
    return [
        Panel(
            "Unjoined feedback (trace never arrived)",
            "timeseries",
            [
                Target(
                    zero_when_absent(
                        per_second("ragmon_feedback_unjoined_total", "kind, reason", TENANT), "kind"
                    ),
                    "{{kind}} {{reason}}",
                )
            ],
            description="Feedback whose trace was not sampled or not sent within the wait: counted, not attributed.",
            unit="reqps",
            stacked=True,
            width=12,
        ),
        Panel(
            "Feedback that arrived before its trace",
            "timeseries",
            [
                Target(
                    zero_when_absent(per_second("ragmon_feedback_parked_total", "tenant", TENANT), "tenant"),
                    "{{tenant}}",
                )
            ],
            description="Parked until its trace arrives, then counted with the trace's labels.",
            unit="reqps",
            width=12,
        ),
    ]


def build(limits: Limits) -> Board:
    return Board(
        UID,
        "ragmon / Feedback",
        "What users did with the answers: feedback by kind and reason, the regeneration rate against its "
        "control band, by intent and release, and feedback that could not be joined to a trace.",
        [
            Row("Regeneration guardrail", [_band(limits)]),
            Row("Feedback", _kinds()),
            Row("Joining feedback to traces", _joins()),
        ],
        tags=("feedback",),
    )
