"""User feedback: by kind and reason, the regeneration and thumbs-down bands, by intent and release, unjoined."""

from __future__ import annotations

from dashboards.common import Board, Limits, band_panel
from dashboards.model import Panel, Row, Target
from dashboards.promql import TENANT, TV, per_second, quantile, sel, share, zero_when_absent

UID = "ragmon-feedback"
FEEDBACK = "ragmon_feedback_total"
REGENERATE = 'kind="regenerate"'
SERIES = "{{tenant}} / {{variant}}"


def _band(limits: Limits) -> Panel:
    return band_panel(
        "Regeneration rate",
        "ragmon:regeneration:",
        limits.guardrails.regeneration,
        "Share of answers regenerated",
        SERIES,
    )


def _thumbs_band(limits: Limits) -> Panel:
    return band_panel(
        "Thumbs-down rate",
        "ragmon:thumbs_down:",
        limits.guardrails.thumbs_down,
        "Down votes over thumbs votes",
        SERIES,
        " votes",
    )


def _by(dimension: str) -> list[Panel]:
    """Thumbs-down rate and feedback coverage by intent or release, each with its count beside it."""
    legend = "{{" + dimension + "}}"
    return [
        Panel(
            f"Thumbs-down rate by {dimension}",
            "timeseries",
            [
                Target(sel(f"ragmon:thumbs_down_by_{dimension}:rate", TV), legend),
            ],
            description=f"Down / (up + down) per {dimension} over the band's window; no votes: no data.",
            unit="percentunit",
            minimum=0,
            width=8,
        ),
        Panel(
            f"Thumbs votes by {dimension}",
            "timeseries",
            [Target(sel(f"ragmon:thumbs_down_by_{dimension}:trials", TV), legend)],
            description="The votes behind each rate beside it: a rate from 3 votes reads as such.",
            unit="short",
            minimum=0,
            width=8,
        ),
        Panel(
            f"Feedback coverage by {dimension}",
            "timeseries",
            [Target(sel(f"ragmon:feedback_coverage_by_{dimension}:rate", TV), legend)],
            description="Traces with any feedback / traces over the band's window.",
            unit="percentunit",
            minimum=0,
            width=8,
        ),
    ]


def _implicit() -> list[Panel]:
    traffic = per_second("ragmon_rag_queries_total", "intent", TV)
    traces = "ragmon_feedback_traces_total"
    cited = per_second("ragmon_rag_cited_answers_total", "intent", TV)
    return [
        Panel(
            "Copy and edit rate by intent",
            "timeseries",
            [
                Target(share(per_second(traces, "intent", TV, 'kind="copy"'), traffic), "copy {{intent}}"),
                Target(share(per_second(traces, "intent", TV, 'kind="edit"'), traffic), "edit {{intent}}"),
            ],
            description="Traces with at least one copy (edit) / traces. Candidate signals: their direction "
            "is unproven until checked against blind review.",
            unit="percentunit",
            minimum=0,
            width=8,
        ),
        Panel(
            "Citation click-through by intent",
            "timeseries",
            [Target(share(per_second(traces, "intent", TV, 'kind="citation_click"'), cited), "{{intent}}")],
            description="Answers with at least one citation click / answers that had citations.",
            unit="percentunit",
            minimum=0,
            width=8,
        ),
        Panel(
            "Dwell time (median and p10) by intent",
            "timeseries",
            [
                Target(
                    quantile(0.5, "ragmon_feedback_dwell_duration_seconds", "intent", TV), "p50 {{intent}}"
                ),
                Target(
                    quantile(0.1, "ragmon_feedback_dwell_duration_seconds", "intent", TV), "p10 {{intent}}"
                ),
            ],
            description="Seconds users stayed on an answer; a falling p10 is more answers left at a glance.",
            unit="s",
            minimum=0,
            width=8,
        ),
    ]


def _sessions() -> list[Panel]:
    """Reformulations and unresolved sessions by intent (docs/reformulations.md), counts beside them."""
    followups = "ragmon_feedback_followups_total"
    legend = "{{tenant}} / {{intent}}"
    return [
        Panel(
            "Reformulation rate by intent",
            "timeseries",
            [Target(sel("ragmon:reformulation_by_intent:rate", TENANT), legend)],
            description="Reformulated / compared follow-ups (same session, within sessions.window_s, cosine >= "
            "min_cosine), counted on the earlier query's intent; below the minimum count: no data.",
            unit="percentunit",
            minimum=0,
            width=8,
        ),
        Panel(
            "Unresolved sessions by intent",
            "timeseries",
            [Target(sel("ragmon:sessions_unresolved_by_intent:rate", TENANT), legend)],
            description="Sessions whose last answer got a thumbs down or a regenerate, or was itself a "
            "reformulation, over sessions ended (idle past sessions.idle_s); below the minimum: no data.",
            unit="percentunit",
            minimum=0,
            width=8,
        ),
        Panel(
            "Follow-ups and ended sessions by intent",
            "timeseries",
            [
                Target(sel("ragmon:reformulation_by_intent:trials", TENANT), "compared " + legend),
                Target(
                    per_second(followups, "tenant, intent", TENANT, 'outcome="not_compared"', fn="increase"),
                    "not compared " + legend,
                ),
                Target(sel("ragmon:sessions_unresolved_by_intent:trials", TENANT), "ended " + legend),
            ],
            description="The counts behind the two rates beside it (over the rules' window), and the "
            "follow-ups without embeddings of one model on both sides, left out of the rate.",
            unit="short",
            minimum=0,
            width=8,
        ),
    ]


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
        "What users did with the answers: feedback by kind and reason, the regeneration and thumbs-down rates "
        "against their control bands, by intent and release with coverage beside them, copy/edit/"
        "click-through and dwell, reformulations and unresolved sessions, and feedback that could not be joined to a trace.",
        [
            Row("Regeneration guardrail", [_band(limits)]),
            Row("Thumbs-down guardrail", [_thumbs_band(limits), *_by("intent"), *_by("release")]),
            Row("Implicit signals", _implicit()),
            Row("Sessions: reformulations and unresolved sessions", _sessions()),
            Row("Feedback", _kinds()),
            Row("Joining feedback to traces", _joins()),
        ],
        tags=("feedback",),
    )
