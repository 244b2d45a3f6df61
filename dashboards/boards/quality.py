"""Answer quality: faithfulness (HHEM) with its coverage, metadata-filter false exclusion with attribution,
retrieval quality (Recall, nDCG @k) on labelled traces per stage, and refusals per intent against their band."""

from __future__ import annotations

from collections.abc import Callable

from dashboards.common import Board, Limits, quantile_lines
from dashboards.model import Panel, Row, Target, bad_above, bad_below
from dashboards.panels import (
    band_panel,
    bargauge,
    count_panel,
    counter,
    failures_panel,
    per_second_panel,
    rate_with_sample,
    ratio_panel,
    recorded,
    share_panel,
    timeseries,
)
from dashboards.promql import RANGE_WINDOW, TENANT, TV, per_second, ratio, share, zero_when_absent

UID = "ragmon-quality"
SERIES = "{{tenant}} / {{variant}}"
TVS = "tenant, variant"


def _per_tv(numerator: str, denominator: str, of: Callable[[str, str], str] = share) -> Target:
    """One tenant/variant series: counter `numerator` over counter `denominator`, both per second."""
    return Target(of(per_second(numerator, TVS, TV), per_second(denominator, TVS, TV)), SERIES)


def _faithfulness(limits: Limits) -> list[Panel]:
    f = limits.guardrails.faithfulness
    return [
        ratio_panel(
            f"Mean HHEM score ({f.window}, floor {f.min_mean_score:g})",
            recorded("ragmon:faithfulness_score:mean", SERIES),
            description=f"P(consistent) of answers given their context, averaged over {f.window} (recording rule). "
            f"Pages below the floor with at least {f.min_samples} scored answers.",
            thresholds=bad_below(f.min_mean_score),
            decimals=2,
            width=12,
        ),
        ratio_panel(
            "Score quantiles (live)",
            *quantile_lines("ragmon_faithfulness_score_ratio", TV, qs=(0.1, 0.5, 0.9)),
            description="A falling p10 shows a minority of unfaithful answers before the mean moves.",
            decimals=2,
            width=12,
        ),
    ]


def _faithfulness_coverage() -> list[Panel]:
    scored = "ragmon_faithfulness_scored_total"
    no_claims = zero_when_absent(per_second("ragmon_faithfulness_no_claims_total", "reason", TV), "reason")
    return [
        share_panel(
            "Coverage: scored / eligible",
            _per_tv(scored, "ragmon_faithfulness_eligible_total", ratio),
            description="Share of answers with claims that were scored; the rest is in 'skipped by reason'.",
            maximum=1,
        ),
        per_second_panel(
            "Skipped by reason",
            counter("ragmon_faithfulness_skipped_total", "reason", "{{reason}}", TV, zero="reason"),
            description="sampled_out (the configured sample), over_budget (scorer saturated), no_context, "
            "hypothesis_too_long.",
        ),
        share_panel(
            "No-claims answers (refused, empty)",
            Target(
                ratio(no_claims, per_second("ragmon_faithfulness_traces_total", "", TV), per=""), "{{reason}}"
            ),
            description="Refusals and empty answers are counted, never scored as faithful. Share of traces.",
        ),
        share_panel(
            "Scored answers below the per-answer threshold",
            _per_tv("ragmon_faithfulness_below_threshold_total", scored),
            description="Against each tenant's configured per-answer threshold (ragmon_faithfulness_threshold_ratio).",
            width=12,
        ),
        share_panel(
            "Premises truncated to the token budget",
            _per_tv("ragmon_faithfulness_truncated_total", scored),
            description="A truncated premise can make a faithful answer look unsupported.",
            width=12,
        ),
    ]


def _exclusion(limits: Limits) -> list[Panel]:
    x = limits.guardrails.false_exclusion
    predicates = "ragmon_exclusion_predicate_exclusions_total"
    return [
        share_panel(
            f"False exclusion rate ({x.window}, limit {x.max_rate:.0%})",
            recorded("ragmon:false_exclusion:rate", SERIES),
            description="Queries with eligible gold that lost all of it to relevance filters / queries with "
            "eligible gold (recording rule). An empty window is no data, never 0%.",
            thresholds=bad_above(x.max_rate),
            width=12,
        ),
        timeseries(
            f"Queries with eligible gold ({x.window}, min {x.min_eligible})",
            recorded("ragmon:false_exclusion:eligible", SERIES),
            description="The rate's denominator. Below the minimum the alert stays quiet: too little evidence.",
            thresholds=bad_below(x.min_eligible),
            decimals=0,
            width=12,
        ),
        per_second_panel(
            "Exclusion attribution by predicate (field / op)",
            counter(predicates, "field, op", "{{field}} {{op}}", TV, zero="field"),
            description="Excluded gold documents by the relevance predicate they fail: which filter to look at.",
            unit="short",
            width=12,
        ),
        bargauge(
            "Excluded gold by predicate (dashboard range)",
            counter(
                predicates,
                "field, op",
                "{{field}} {{op}}",
                TV,
                zero="field",
                fn="increase",
                window=RANGE_WINDOW,
            ),
            decimals=0,
            width=12,
        ),
    ]


def _exclusion_evidence() -> list[Panel]:
    unverified = "ragmon_exclusion_unverified_documents_total"
    return [
        share_panel(
            "Excluded share of eligible gold documents",
            _per_tv(
                "ragmon_exclusion_excluded_gold_documents_total",
                "ragmon_exclusion_eligible_gold_documents_total",
                ratio,
            ),
            description="Per document rather than per query: partial losses show here first.",
        ),
        per_second_panel(
            "Exclusion samples by evidence source",
            counter("ragmon_exclusion_samples_total", "source", "{{source}}", TV),
            description="`labels`: gold ids from the app or reviewers; `proxy`: candidates above the relevance "
            "threshold.",
        ),
        failures_panel(
            "Entitlement leaks and unverifiable documents",
            counter("ragmon_exclusion_leaks_total", "kind", "leak {{kind}}", TENANT, fn="increase"),
            counter(unverified, "kind", "unverified {{kind}}", TENANT, zero="kind", fn="increase"),
            description="A leak is a security event (paged on the first). Unverified: metadata lacked an "
            "entitlement field, so no check was possible.",
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
        of = f'metric="{metric}"'
        return ratio_panel(
            f"{title} by stage ({w}, min n {r.min_n})",
            recorded("ragmon:retrieval:mean", per_stage, window, of),
            recorded("ragmon:retrieval:half_width", "± 95% " + per_stage, window, of),
            description=f"Mean per-trace {title} over labelled traces (gold from labels, never proxy gold), "
            "over the retrieved candidates and over the context given to the generator, with its "
            f"normal-approximation 95% half-width. Under {r.min_n} labelled traces of an intent: no data "
            "(label more), never 0.",
            decimals=2,
        )

    by_release = "{{release}} / {{stage}} @{{k}}"
    return [
        mean("recall", "Recall@k"),
        mean("ndcg", "nDCG@k"),
        ratio_panel(
            f"Recall@k by release and stage ({w}, min n {r.min_n})",
            recorded("ragmon:retrieval_release:mean", by_release, window, 'metric="recall"'),
            recorded("ragmon:retrieval_release:half_width", "± 95% " + by_release, window, 'metric="recall"'),
            description="The same means per release the traces named (all intents together), so a release "
            "reads against the one before it (its labelled n is on the next panel): a new release has no mean "
            f"(no data) until it has {r.min_n} labelled traces. Releases are capped per tenant "
            "(`exclusion.max_releases`, the rest are `other`); `none`: traces that named no release.",
            decimals=2,
        ),
        count_panel(
            f"Labelled traces by stage ({w}, the metrics' n)",
            recorded("ragmon:retrieval:labelled", "{{intent}} / {{stage}}", window),
            recorded("ragmon:retrieval_release:labelled", "release {{release}} / {{stage}}", window),
            description="Traces whose gold is known from labels, per intent and stage, and per release and "
            "stage (the same traces grouped by release): under the minimum the means above are absent "
            "(no data), not clean.",
            thresholds=bad_below(r.min_n),
            decimals=0,
        ),
    ]


def _refusals(limits: Limits) -> list[Panel]:
    """The refusal band per intent, with each intent's queries beside it (a rate from 3 queries reads as such)."""
    per_intent = "{{tenant}} / {{intent}}"
    band = band_panel(
        "Refusals by intent",
        "ragmon:refusal:",
        limits.guardrails.refusal,
        "Refused answers over queries, per intent,",
        per_intent,
        " queries of the intent",
    )
    return rate_with_sample(
        band,
        "Queries by intent (the refusal band's n)",
        recorded("ragmon:refusal:queries", per_intent),
        "The queries of each intent in the band's window: under the minimum the band is blind "
        "for that intent (no alert), not clean.",
        width=24,
    )


def _checks(limits: Limits) -> list[Panel]:
    """The deterministic answer checks (docs/checks.md): each check's failure rate, with the answers it
    applied to beside it."""
    ch = limits.guardrails.checks
    per_check = "{{tenant}} / {{check}}"
    rates = ", ".join(f"{k} {v:g}" for k, v in sorted(ch.max_rates.items()))
    failing = share_panel(
        f"Answer checks: failure rate by check ({ch.window})",
        recorded("ragmon:check:rate", per_check),
        description=f"Answers that failed a deterministic check over the answers it applied to (skips count "
        f"nowhere). Alert above {ch.max_rate:.0%} by default, {rates}, with at least {ch.min_checked} "
        "checked answers.",
        thresholds=bad_above(ch.max_rate),
        width=12,
    )
    return rate_with_sample(
        failing,
        f"Answer checks: answers checked ({ch.window})",
        recorded("ragmon:check:trials", per_check),
        "The answers each check applied to (pass + fail): a rate from 3 answers reads as such.",
        width=12,
    )


def build(limits: Limits) -> Board:
    return Board(
        UID,
        "ragmon / Quality",
        "Faithfulness of answers to their context (HHEM-2.1-Open) with its coverage, and relevance filters that "
        "falsely exclude the right documents, with the predicate to blame; refusals per intent against their band.",
        [
            Row("Faithfulness", [*_faithfulness(limits), *_faithfulness_coverage()]),
            Row("Filter false exclusion", [*_exclusion(limits), *_exclusion_evidence()]),
            Row("Retrieval quality (labelled traces)", _retrieval(limits)),
            Row("Refusals by intent", _refusals(limits)),
            Row("Deterministic answer checks", _checks(limits)),
        ],
        tags=("quality",),
    )
