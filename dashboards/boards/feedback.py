"""User feedback: by kind and reason, the regeneration and thumbs-down bands, by intent and release, unjoined."""

from __future__ import annotations

from dashboards.common import Board, Limits
from dashboards.model import Panel, Row, Target
from dashboards.panels import (
    band_panel,
    count_panel,
    counter,
    per_second_panel,
    rate_with_sample,
    recorded,
    seconds_panel,
    share_panel,
)
from dashboards.promql import TENANT, TV, per_second, quantile, sel, share

UID = "ragmon-feedback"
FEEDBACK = "ragmon_feedback_total"
REGENERATE = 'kind="regenerate"'
SERIES = "{{tenant}} / {{variant}}"


def _bands(limits: Limits) -> tuple[Panel, Panel]:
    """The two feedback guardrails against their control bands: regenerations, and thumbs down."""
    g = limits.guardrails
    regenerations = band_panel(
        "Regeneration rate", "ragmon:regeneration:", g.regeneration, "Share of answers regenerated", SERIES
    )
    thumbs_down = band_panel(
        "Thumbs-down rate",
        "ragmon:thumbs_down:",
        g.thumbs_down,
        "Down votes over thumbs votes",
        SERIES,
        " votes",
    )
    return regenerations, thumbs_down


def _by(dimension: str) -> list[Panel]:
    """Thumbs-down rate and feedback coverage by intent or release, each with its count beside it."""
    legend = "{{" + dimension + "}}"
    thumbs, coverage = f"ragmon:thumbs_down_by_{dimension}:", f"ragmon:feedback_coverage_by_{dimension}:"
    return [
        *rate_with_sample(
            share_panel(
                f"Thumbs-down rate by {dimension}",
                recorded(thumbs + "rate", legend),
                description=f"Down / (up + down) per {dimension} over the band's window; no votes: no data.",
            ),
            f"Thumbs votes by {dimension}",
            recorded(thumbs + "trials", legend),
            "The votes behind each rate beside it: a rate from 3 votes reads as such.",
        ),
        share_panel(
            f"Feedback coverage by {dimension}",
            recorded(coverage + "rate", legend),
            description="Traces with any feedback / traces over the band's window.",
        ),
    ]


def _implicit() -> list[Panel]:
    traffic = per_second("ragmon_rag_queries_total", "intent", TV)
    cited = per_second("ragmon_rag_cited_answers_total", "intent", TV)

    def traces(kind: str, per: str, legend: str) -> Target:
        return Target(
            share(per_second("ragmon_feedback_traces_total", "intent", TV, f'kind="{kind}"'), per), legend
        )

    def dwell(q: float) -> Target:
        return Target(
            quantile(q, "ragmon_feedback_dwell_duration_seconds", "intent", TV),
            f"p{round(q * 100)} {{{{intent}}}}",
        )

    return [
        share_panel(
            "Copy and edit rate by intent",
            traces("copy", traffic, "copy {{intent}}"),
            traces("edit", traffic, "edit {{intent}}"),
            description="Traces with at least one copy (edit) / traces. Candidate signals: their direction "
            "is unproven until checked against blind review.",
        ),
        share_panel(
            "Citation click-through by intent",
            traces("citation_click", cited, "{{intent}}"),
            description="Answers with at least one citation click / answers that had citations.",
        ),
        seconds_panel(
            "Dwell time (median and p10) by intent",
            dwell(0.5),
            dwell(0.1),
            description="Seconds users stayed on an answer; a falling p10 is more answers left at a glance.",
            minimum=0,
        ),
    ]


def _sessions() -> list[Panel]:
    """Reformulations and unresolved sessions by intent (docs/reformulations.md), counts beside them."""
    legend = "{{tenant}} / {{intent}}"
    reformulation, unresolved = "ragmon:reformulation_by_intent:", "ragmon:sessions_unresolved_by_intent:"
    not_compared = 'outcome="not_compared"'
    return [
        share_panel(
            "Reformulation rate by intent",
            Target(sel(reformulation + "rate", TENANT), legend),
            description="Reformulated / compared follow-ups (same session, within sessions.window_s, cosine >= "
            "min_cosine), counted on the earlier query's intent; below the minimum count: no data.",
        ),
        share_panel(
            "Unresolved sessions by intent",
            Target(sel(unresolved + "rate", TENANT), legend),
            description="Sessions whose last answer got a thumbs down or a regenerate, or was itself a "
            "reformulation, over sessions ended (idle past sessions.idle_s); below the minimum: no data.",
        ),
        count_panel(
            "Follow-ups and ended sessions by intent",
            Target(sel(reformulation + "trials", TENANT), "compared " + legend),
            counter(
                "ragmon_feedback_followups_total",
                "tenant, intent",
                "not compared " + legend,
                TENANT,
                not_compared,
                fn="increase",
            ),
            Target(sel(unresolved + "trials", TENANT), "ended " + legend),
            description="The counts behind the two rates beside it (over the rules' window), and the "
            "follow-ups without embeddings of one model on both sides, left out of the rate.",
        ),
    ]


def _kinds() -> list[Panel]:
    traffic = per_second("ragmon_rag_queries_total", "intent", TV)
    return [
        per_second_panel(
            "Feedback by kind",
            counter(FEEDBACK, "kind", "{{kind}}", TV),
            description="Joined to the trace's variant, release and intent, even when it arrived before or after "
            "the trace.",
            width=12,
        ),
        per_second_panel(
            "Feedback by reason",
            counter(FEEDBACK, "reason", "{{reason}}", TV, 'reason!="none"'),
            description="Reasons users gave (wrong, incomplete, off_topic, harmful, slow, other).",
            width=12,
        ),
        share_panel(
            "Regeneration rate by intent",
            Target(share(per_second(FEEDBACK, "intent", TV, REGENERATE), traffic), "{{intent}}"),
            description="Regenerations over traces, per intent: which kind of question users retry.",
            width=12,
        ),
        per_second_panel(
            "Feedback by release",
            counter(FEEDBACK, "release, kind", "{{release}} {{kind}}", TV),
            description="Compare a release's feedback mix with the one before it.",
            stacked=False,
            width=12,
        ),
    ]


def _joins() -> list[Panel]:
    return [
        per_second_panel(
            "Unjoined feedback (trace never arrived)",
            counter(
                "ragmon_feedback_unjoined_total", "kind, reason", "{{kind}} {{reason}}", TENANT, zero="kind"
            ),
            description="Feedback whose trace was not sampled or not sent within the wait: counted, not attributed.",
            width=12,
        ),
        per_second_panel(
            "Feedback that arrived before its trace",
            counter("ragmon_feedback_parked_total", "tenant", "{{tenant}}", TENANT, zero="tenant"),
            description="Parked until its trace arrives, then counted with the trace's labels.",
            stacked=False,
            width=12,
        ),
    ]


def build(limits: Limits) -> Board:
    regenerations, thumbs_down = _bands(limits)
    return Board(
        UID,
        "ragmon / Feedback",
        "What users did with the answers: feedback by kind and reason, the regeneration and thumbs-down rates "
        "against their control bands, by intent and release with coverage beside them, copy/edit/"
        "click-through and dwell, reformulations and unresolved sessions, and feedback that could not be joined to a trace.",
        [
            Row("Regeneration guardrail", [regenerations]),
            Row("Thumbs-down guardrail", [thumbs_down, *_by("intent"), *_by("release")]),
            Row("Implicit signals", _implicit()),
            Row("Sessions: reformulations and unresolved sessions", _sessions()),
            Row("Feedback", _kinds()),
            Row("Joining feedback to traces", _joins()),
        ],
        tags=("feedback",),
    )
