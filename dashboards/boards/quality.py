"""Answer quality: faithfulness (HHEM) with its coverage, metadata-filter false exclusion with attribution,
retrieval quality (Recall, nDCG @k) on labelled traces per stage, and refusals per intent against their band."""

from __future__ import annotations

from dashboards.common import Board, Limits
from dashboards.model import Panel, Row, Target, bad_above, bad_below
from dashboards.panels import band_panel
from dashboards.promql import TENANT, TV, per_second, quantile, ratio, sel, share, zero_when_absent

UID = "ragmon-quality"
SERIES = "{{tenant}} / {{variant}}"
TVS = "tenant, variant"


def _faithfulness(limits: Limits) -> list[Panel]:
    f = limits.guardrails.faithfulness
    return [
        Panel(
            f"Mean HHEM score ({f.window}, floor {f.min_mean_score:g})",
            "timeseries",
            [Target(sel("ragmon:faithfulness_score:mean", TV), SERIES)],
            description=f"P(consistent) of answers given their context, averaged over {f.window} (recording rule). "
            f"Pages below the floor with at least {f.min_samples} scored answers.",
            thresholds=bad_below(f.min_mean_score),
            minimum=0,
            maximum=1,
            decimals=2,
            width=12,
        ),
        Panel(
            "Score quantiles (live)",
            "timeseries",
            [
                Target(quantile(q, "ragmon_faithfulness_score_ratio", "", TV), f"p{round(q * 100)}")
                for q in (0.1, 0.5, 0.9)
            ],
            description="A falling p10 shows a minority of unfaithful answers before the mean moves.",
            minimum=0,
            maximum=1,
            decimals=2,
            width=12,
        ),
    ]


def _faithfulness_coverage() -> list[Panel]:
    return [
        Panel(
            "Coverage: scored / eligible",
            "timeseries",
            [
                Target(
                    ratio(
                        per_second("ragmon_faithfulness_scored_total", TVS, TV),
                        per_second("ragmon_faithfulness_eligible_total", TVS, TV),
                    ),
                    SERIES,
                )
            ],
            description="Share of answers with claims that were scored; the rest is in 'skipped by reason'.",
            unit="percentunit",
            minimum=0,
            maximum=1,
            width=8,
        ),
        Panel(
            "Skipped by reason",
            "timeseries",
            [
                Target(
                    zero_when_absent(per_second("ragmon_faithfulness_skipped_total", "reason", TV), "reason"),
                    "{{reason}}",
                )
            ],
            description="sampled_out (the configured sample), over_budget (scorer saturated), no_context, "
            "hypothesis_too_long.",
            unit="reqps",
            stacked=True,
            width=8,
        ),
        Panel(
            "No-claims answers (refused, empty)",
            "timeseries",
            [
                Target(
                    ratio(
                        zero_when_absent(
                            per_second("ragmon_faithfulness_no_claims_total", "reason", TV), "reason"
                        ),
                        per_second("ragmon_faithfulness_traces_total", "", TV),
                        per="",
                    ),
                    "{{reason}}",
                )
            ],
            description="Refusals and empty answers are counted, never scored as faithful. Share of traces.",
            unit="percentunit",
            minimum=0,
            width=8,
        ),
    ]


def _faithfulness_detail() -> list[Panel]:
    return [
        Panel(
            "Scored answers below the per-answer threshold",
            "timeseries",
            [
                Target(
                    share(
                        per_second("ragmon_faithfulness_below_threshold_total", TVS, TV),
                        per_second("ragmon_faithfulness_scored_total", TVS, TV),
                    ),
                    SERIES,
                )
            ],
            description="Against each tenant's configured per-answer threshold (ragmon_faithfulness_threshold_ratio).",
            unit="percentunit",
            minimum=0,
            width=12,
        ),
        Panel(
            "Premises truncated to the token budget",
            "timeseries",
            [
                Target(
                    share(
                        per_second("ragmon_faithfulness_truncated_total", TVS, TV),
                        per_second("ragmon_faithfulness_scored_total", TVS, TV),
                    ),
                    SERIES,
                )
            ],
            description="A truncated premise can make a faithful answer look unsupported.",
            unit="percentunit",
            minimum=0,
            width=12,
        ),
    ]


def _exclusion(limits: Limits) -> list[Panel]:
    x = limits.guardrails.false_exclusion
    return [
        Panel(
            f"False exclusion rate ({x.window}, limit {x.max_rate:.0%})",
            "timeseries",
            [Target(sel("ragmon:false_exclusion:rate", TV), SERIES)],
            description="Queries with eligible gold that lost all of it to relevance filters / queries with "
            "eligible gold (recording rule). An empty window is no data, never 0%.",
            unit="percentunit",
            thresholds=bad_above(x.max_rate),
            minimum=0,
            width=12,
        ),
        Panel(
            f"Queries with eligible gold ({x.window}, min {x.min_eligible})",
            "timeseries",
            [Target(sel("ragmon:false_exclusion:eligible", TV), SERIES)],
            description="The rate's denominator. Below the minimum the alert stays quiet: too little evidence.",
            thresholds=bad_below(x.min_eligible),
            decimals=0,
            width=12,
        ),
        Panel(
            "Exclusion attribution by predicate (field / op)",
            "timeseries",
            [
                Target(
                    zero_when_absent(
                        per_second("ragmon_exclusion_predicate_exclusions_total", "field, op", TV), "field"
                    ),
                    "{{field}} {{op}}",
                )
            ],
            description="Excluded gold documents by the relevance predicate they fail: which filter to look at.",
            unit="short",
            stacked=True,
            width=12,
        ),
        Panel(
            "Excluded gold by predicate (dashboard range)",
            "bargauge",
            [
                Target(
                    zero_when_absent(
                        per_second(
                            "ragmon_exclusion_predicate_exclusions_total",
                            "field, op",
                            TV,
                            fn="increase",
                            window="$__range",
                        ),
                        "field",
                    ),
                    "{{field}} {{op}}",
                )
            ],
            decimals=0,
            width=12,
        ),
    ]


def _exclusion_evidence() -> list[Panel]:
    return [
        Panel(
            "Excluded share of eligible gold documents",
            "timeseries",
            [
                Target(
                    ratio(
                        per_second("ragmon_exclusion_excluded_gold_documents_total", TVS, TV),
                        per_second("ragmon_exclusion_eligible_gold_documents_total", TVS, TV),
                    ),
                    SERIES,
                )
            ],
            description="Per document rather than per query: partial losses show here first.",
            unit="percentunit",
            minimum=0,
            width=8,
        ),
        Panel(
            "Exclusion samples by evidence source",
            "timeseries",
            [Target(per_second("ragmon_exclusion_samples_total", "source", TV), "{{source}}")],
            description="`labels`: gold ids from the app or reviewers; `proxy`: candidates above the relevance "
            "threshold.",
            unit="reqps",
            stacked=True,
            width=8,
        ),
        Panel(
            "Entitlement leaks and unverifiable documents",
            "timeseries",
            [
                Target(
                    per_second("ragmon_exclusion_leaks_total", "kind", TENANT, fn="increase"), "leak {{kind}}"
                ),
                Target(
                    zero_when_absent(
                        per_second(
                            "ragmon_exclusion_unverified_documents_total", "kind", TENANT, fn="increase"
                        ),
                        "kind",
                    ),
                    "unverified {{kind}}",
                ),
            ],
            description="A leak is a security event (paged on the first). Unverified: metadata lacked an "
            "entitlement field, so no check was possible.",
            thresholds=bad_above(1),
            decimals=0,
            width=8,
        ),
    ]


def _retrieval(limits: Limits) -> list[Panel]:
    """The online retrieval metrics (docs/retrieval-metrics.md) per stage, with the labelled n beside them:
    gold at `candidates` but not at `context` is a reranker or packer drop, at neither a retriever miss."""
    r = limits.guardrails.retrieval
    w = r.windows[0]
    window = f'window="{w}"'
    per_stage = "{{intent}} / {{stage}} @{{k}}"

    def mean(metric: str, title: str) -> Panel:
        return Panel(
            f"{title} by stage ({w}, min n {r.min_n})",
            "timeseries",
            [
                Target(sel("ragmon:retrieval:mean", TV, window, f'metric="{metric}"'), per_stage),
                Target(
                    sel("ragmon:retrieval:half_width", TV, window, f'metric="{metric}"'),
                    "± 95% " + per_stage,
                ),
            ],
            description=f"Mean per-trace {title} over labelled traces (gold from labels, never proxy gold), "
            "over the retrieved candidates and over the context given to the generator, with its "
            f"normal-approximation 95% half-width. Under {r.min_n} labelled traces of an intent: no data "
            "(label more), never 0.",
            minimum=0,
            maximum=1,
            decimals=2,
            width=8,
        )

    return [
        mean("recall", "Recall@k"),
        mean("ndcg", "nDCG@k"),
        Panel(
            f"Labelled traces by stage ({w}, the metrics' n)",
            "timeseries",
            [Target(sel("ragmon:retrieval:labelled", TV, window), "{{intent}} / {{stage}}")],
            description="Traces whose gold is known from labels, per intent and stage: under the minimum the "
            "means above are absent (no data), not clean.",
            thresholds=bad_below(r.min_n),
            unit="short",
            decimals=0,
            minimum=0,
            width=8,
        ),
    ]


def _refusals(limits: Limits) -> list[Panel]:
    """The refusal band per intent, with each intent's queries beside it (a rate from 3 queries reads as such)."""
    per_intent = "{{tenant}} / {{intent}}"
    return [
        band_panel(
            "Refusals by intent",
            "ragmon:refusal:",
            limits.guardrails.refusal,
            "Refused answers over queries, per intent,",
            per_intent,
            " queries of the intent",
        ),
        Panel(
            "Queries by intent (the refusal band's n)",
            "timeseries",
            [Target(sel("ragmon:refusal:queries", TV), per_intent)],
            description="The queries of each intent in the band's window: under the minimum the band is blind "
            "for that intent (no alert), not clean.",
            unit="short",
            minimum=0,
            width=24,
        ),
    ]


def _checks(limits: Limits) -> list[Panel]:
    """The deterministic answer checks (docs/checks.md): each check's failure rate, with the answers it
    applied to beside it."""
    ch = limits.guardrails.checks
    per_check = "{{tenant}} / {{check}}"
    return [
        Panel(
            f"Answer checks: failure rate by check ({ch.window})",
            "timeseries",
            [Target(sel("ragmon:check:rate", TV), per_check)],
            description=f"Answers that failed a deterministic check over the answers it applied to (skips count "
            f"nowhere). Alert above {ch.max_rate:.0%} by default, "
            + ", ".join(f"{k} {v:g}" for k, v in sorted(ch.max_rates.items()))
            + f", with at least {ch.min_checked} checked answers.",
            unit="percentunit",
            thresholds=bad_above(ch.max_rate),
            minimum=0,
            width=12,
        ),
        Panel(
            f"Answer checks: answers checked ({ch.window})",
            "timeseries",
            [Target(sel("ragmon:check:trials", TV), per_check)],
            description="The answers each check applied to (pass + fail): a rate from 3 answers reads as such.",
            unit="short",
            minimum=0,
            width=12,
        ),
    ]


def build(limits: Limits) -> Board:
    return Board(
        UID,
        "ragmon / Quality",
        "Faithfulness of answers to their context (HHEM-2.1-Open) with its coverage, and relevance filters that "
        "falsely exclude the right documents, with the predicate to blame; refusals per intent against their band.",
        [
            Row("Faithfulness", [*_faithfulness(limits), *_faithfulness_coverage(), *_faithfulness_detail()]),
            Row("Filter false exclusion", [*_exclusion(limits), *_exclusion_evidence()]),
            Row("Retrieval quality (labelled traces)", _retrieval(limits)),
            Row("Refusals by intent", _refusals(limits)),
            Row("Deterministic answer checks", _checks(limits)),
        ],
        tags=("quality",),
    )
