"""Render Prometheus recording and alert rules from the `guardrails` config.

Recording rules compute each guardrail's signal over its window (production
and candidate variants alike, so dashboards can compare them); alerts compare
only `variant="production"`: a shadow candidate never trips a production
guardrail. Thresholds live in the rendered expressions (per-tenant overrides
as `or` branches), so the alert expressions stay plain PromQL that
`promtool test rules` can check on both sides of every boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from service.rules import intents as by_intent
from service.rules.config import BandRule, GuardrailsConfig, seconds
from service.rules.intents import ON_INTENT, intent_recording_rules, tenant_or_intents
from service.rules.promql import compare_with_overrides, number, selector, window_count

PROD = "production"


# Seed 002's release-or-drift hint is about what the app serves: it fits the quality guardrails and
# entitlement leaks, not the pipeline's own health nor its symptoms (a broker pause is neither).
TRIAGED_CATEGORIES = ("guardrail", "security")


def _alert(
    cfg: GuardrailsConfig,
    name: str,
    expr: str,
    for_: str,
    severity: str,
    category: str,
    summary: str,
    description: str,
    triage_within: str | None = None,
    **labels: str,
) -> dict[str, Any]:
    annotations = {"summary": summary, "description": description}
    if category in TRIAGED_CATEGORIES:
        annotations["triage"] = _triage(cfg, triage_within or cfg.release_window)
    annotations["runbook_url"] = f"{cfg.runbook_base_url}#{name.lower()}"
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, "category": category, **labels},
        "annotations": annotations,
    }


def _triage(cfg: GuardrailsConfig, within: str) -> str:
    """Triage (docs/architecture.md, docs/markers.md): right after an app release suggests a regression from
    it; right after a component change (a declared marker naming the component, or one detected in the
    traces) names the component, its versions and how the change was known; without either, drift.
    `within`: how long before the alert a change counts as "right before" (release_window, or longer for an
    alert whose own window and `for:` take longer than that to see a change)."""
    window = int(seconds(within))
    release = 'ragmon:release:last_timestamp_seconds{tenant=\\"%s\\",variant=\\"production\\"}'
    change = 'ragmon:release:component_change_timestamp_seconds{tenant=\\"%s\\",component!=\\"app\\"}'
    query = f"{release} > time() - {window} or {change} > time() - {window}"
    args = " $labels.tenant $labels.tenant"
    return (
        f'{{{{ with printf "{query}"{args} | query }}}}'
        "{{ range . }}{{ if .Labels.component }}"
        '{{ .Labels.component | reReplaceAll "_" " " }} changed from {{ .Labels.from }} to '
        "{{ .Labels.to }} ({{ .Labels.source }}) at {{ .Value | humanizeTimestamp }}, within "
        + within
        + " of this alert: suspect that change. "
        "{{ else }}Release {{ .Labels.release }} ({{ .Labels.tenant }}/{{ .Labels.variant }}) went out at "
        "{{ .Value | humanizeTimestamp }}, within " + within + " of this alert: suspect a regression "
        "from that release. {{ end }}{{ end }}{{ else }}"
        f"No release in the last {within}: suspect drift in traffic or data, not a deploy."
        "{{ end }}"
    )


def recording_rules(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    lat, cost, fai, exc = cfg.latency, cfg.cost, cfg.faithfulness, cfg.false_exclusion
    tv = "tenant, variant"
    return [
        {
            "record": "ragmon:release:last_timestamp_seconds",
            "expr": "max by (tenant, variant) (ragmon_release_last_timestamp_seconds)"
            " * on (tenant, variant) group_left (release) max by (tenant, variant, release) (ragmon_release_info)",
        },
        {
            # the latest change per tenant and component, declared or detected (one series per replica that
            # exports it: the same value, so max), read by the triage annotation
            "record": "ragmon:release:component_change_timestamp_seconds",
            "expr": "max by (tenant, component, from, to, source)"
            " (ragmon_release_component_change_timestamp_seconds)",
        },
        {
            "record": "ragmon:rag_stage_duration_seconds:quantile",
            "expr": f"histogram_quantile({number(lat.quantile)}, sum by ({tv}, stage, le) "
            f"(rate(ragmon_rag_stage_duration_seconds_bucket[{lat.window}])))",
        },
        {
            "record": "ragmon:rag_stage_duration_seconds:samples",
            "expr": f"sum by ({tv}, stage) (increase(ragmon_rag_stage_duration_seconds_count[{lat.window}]))",
        },
        {
            "record": "ragmon:rag_cost_per_query_usd:mean",
            "expr": f"sum by ({tv}) (increase(ragmon_rag_cost_per_query_usd_sum[{cost.window}]))"
            f" / sum by ({tv}) (increase(ragmon_rag_cost_per_query_usd_count[{cost.window}]))",
        },
        {
            "record": "ragmon:rag_cost_per_query_usd:samples",
            "expr": f"sum by ({tv}) (increase(ragmon_rag_cost_per_query_usd_count[{cost.window}]))",
        },
        *regeneration_rules(cfg),
        *feedback_rules(cfg),
        *refusal_rules(cfg),
        *error_rules(cfg),
        *check_rules(cfg),
        *encoder_rules(),
        *probe_rules(),
        *session_rules(cfg),
        *retrieval_rules(cfg),
        {
            "record": "ragmon:faithfulness_score:mean",
            "expr": f"sum by ({tv}) (increase(ragmon_faithfulness_score_ratio_sum[{fai.window}]))"
            f" / sum by ({tv}) (increase(ragmon_faithfulness_score_ratio_count[{fai.window}]))",
        },
        {
            "record": "ragmon:faithfulness_score:samples",
            "expr": f"sum by ({tv}) (increase(ragmon_faithfulness_score_ratio_count[{fai.window}]))",
        },
        {
            "record": "ragmon:false_exclusion:eligible",
            "expr": f"sum by ({tv}) (increase(ragmon_exclusion_eligible_queries_total[{exc.window}]))",
        },
        {
            "record": "ragmon:false_exclusion:rate",
            "expr": f"sum by ({tv}) (increase(ragmon_exclusion_falsely_excluded_queries_total[{exc.window}]))"
            " / (ragmon:false_exclusion:eligible > 0)",
        },
        {
            "record": "ragmon:traces:received",
            "expr": f"sum by ({tv}) (increase(ragmon_rag_queries_total[{exc.no_data_for}]))",
        },
        *intent_recording_rules(cfg),
    ]


@dataclass(frozen=True)
class BandSignal:
    """A share watched by a two-sample control band: `events` of `trials`, recorded as
    `<prefix><events_name>` and `<prefix><trials_name>` (and their `baseline_` twins)."""

    prefix: str
    events: str
    trials: str
    events_name: str
    trials_name: str
    # An events counter that may have no series while trials do (a window of thumbs up only): read 0,
    # and a window without trials is no data, never 0%.
    absent_events_are_zero: bool = False
    # the band's grouping: a per-intent band compares each intent with its own baseline
    by: str = "tenant, variant"


REGENERATION = BandSignal(
    "ragmon:regeneration:",
    'ragmon_feedback_total{kind="regenerate"}',
    "ragmon_rag_queries_total",
    "regenerations",
    "queries",
)
THUMBS_DOWN = BandSignal(
    "ragmon:thumbs_down:",
    'ragmon_feedback_thumbs_total{direction="down"}',
    "ragmon_feedback_thumbs_total",
    "downs",
    "votes",
    absent_events_are_zero=True,
)
REFUSAL = BandSignal(
    "ragmon:refusal:",
    "ragmon_rag_refusals_total",
    "ragmon_rag_queries_total",
    "refusals",
    "queries",
    absent_events_are_zero=True,
    by="tenant, variant, intent",
)


def band_rules(rule: BandRule, s: BandSignal) -> list[dict[str, Any]]:
    """A control band as a two-sample test of proportions.

    Current window: x events of n trials; baseline window: x_b of n_b. The band
    around the baseline is z·√(p̄(1−p̄)(1/n + 1/n_b)) with p̄ the pooled rate, so a
    thin baseline widens it instead of being taken as exact. Counts include each new
    series' first events (promql.window_count). docs/regeneration-band.md and
    docs/thumbs-down-band.md have the measured false-alarm rates and power.
    """
    tv, r, ev, tr = s.by, s.prefix, s.events_name, s.trials_name
    w, bw, bo = rule.window, rule.baseline_window, rule.baseline_offset
    ws, bws, bos = seconds(w), seconds(bw), seconds(bo)
    zero = (lambda trials: f"\nor {trials} * 0") if s.absent_events_are_zero else (lambda trials: "")
    over = (lambda trials: f"({trials} > 0)") if s.absent_events_are_zero else (lambda trials: trials)
    return [
        {"record": r + tr, "expr": window_count(s.trials, w, tv, window_s=ws)},
        {"record": r + ev, "expr": window_count(s.events, w, tv, window_s=ws) + zero(r + tr)},
        {"record": r + "rate", "expr": f"{r}{ev} / {over(r + tr)}"},
        {"record": r + "baseline_" + tr, "expr": window_count(s.trials, bw, tv, bo, bos, bws)},
        {
            "record": r + "baseline_" + ev,
            "expr": window_count(s.events, bw, tv, bo, bos, bws) + zero(f"{r}baseline_{tr}"),
        },
        {"record": r + "baseline_rate", "expr": f"{r}baseline_{ev} / {over(f'{r}baseline_{tr}')}"},
        {
            "record": r + "pooled_rate",
            "expr": f"({r}{ev} + {r}baseline_{ev}) / ({r}{tr} + {r}baseline_{tr})",
        },
        {
            "record": r + "band_half_width",
            "expr": f"{number(rule.sigmas)} * sqrt({r}pooled_rate * (1 - {r}pooled_rate)"
            f" * (1 / {r}{tr} + 1 / {r}baseline_{tr}))",
        },
    ]


def regeneration_rules(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    return band_rules(cfg.regeneration, REGENERATION)


def refusal_rules(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    return band_rules(cfg.refusal, REFUSAL)


ENCODER_WINDOW = "5m"


def encoder_rules() -> list[dict[str, Any]]:
    """Traces whose query and index were embedded by different models, over the last ENCODER_WINDOW."""
    w = ENCODER_WINDOW
    count = window_count("ragmon_rag_encoder_mismatch_total", w, "tenant, variant", window_s=seconds(w))
    return [{"record": "ragmon:encoder_mismatch:count", "expr": count}]


PROBE_SERIES = "tenant, probe_set, embedding_model, index_version"


def probe_rules() -> list[dict[str, Any]]:
    """Each probe set's overlap with its baseline (docs/probes.md). Probes replay production's retrieval (the
    worker exports production's only), so the recorded series carry variant="production"; min/max over the
    worker's replicas."""
    by = PROBE_SERIES

    def production(expr: str) -> str:
        return f'label_replace({expr}, "variant", "{PROD}", "", "")'

    return [
        {
            "record": "ragmon:probe_overlap:ratio",
            "expr": production(f"min by ({by}) (ragmon_rag_probe_overlap_ratio)"),
        },
        {
            "record": "ragmon:probe_compared:queries",
            "expr": production(f"max by ({by}) (ragmon_rag_probe_compared_queries)"),
        },
    ]


def error_rules(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    """Failed requests of all requests, and truncated answers of the answers that gave a finish reason
    (docs/errors.md). An errored trace is in no query counter, so requests = errored + queries."""
    tv, w, tw = "tenant, variant", cfg.errors.window, cfg.truncation.window
    ws = seconds(w)
    errors = window_count("ragmon_rag_errors_total", w, tv, window_s=ws)
    queries = window_count("ragmon_rag_queries_total", w, tv, window_s=ws)
    return [
        {
            "record": "ragmon:errors:requests",
            "expr": f"(\n{errors}\n)\n+ on (tenant, variant) (\n{queries}\n)"
            f"\nor (\n{errors}\n)\nor (\n{queries}\n)",
        },
        {"record": "ragmon:errors:errored", "expr": f"(\n{errors}\n)\nor ragmon:errors:requests * 0"},
        {"record": "ragmon:errors:rate", "expr": "ragmon:errors:errored / (ragmon:errors:requests > 0)"},
        *share_rules(
            "ragmon:truncation",
            'ragmon_rag_finish_reasons_total{reason="length"}',
            "ragmon_rag_finish_reasons_total",
            tw,
            tv,
        ),
    ]


def check_rules(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    """Per (tenant, variant, check): answers the check applied to (pass + fail; a skip is in no count) and
    the share that failed, over `checks.window` (docs/checks.md)."""
    by, w = "tenant, variant, check", cfg.checks.window
    return share_rules(
        "ragmon:check",
        'ragmon_rag_check_results_total{outcome="fail"}',
        'ragmon_rag_check_results_total{outcome=~"pass|fail"}',
        w,
        by,
    )


def share_rules(
    record: str, events: str, trials: str, window: str, by: str, minimum: int | None = None
) -> list[dict[str, Any]]:
    """`<record>:trials` and `<record>:rate` over `window` by `by`: a window with trials but no events
    reads 0; one without trials is no data (absent), never 0%. With `minimum`, the rate exists only from
    `minimum` trials: below it, no data too."""
    ws = seconds(window)
    den = f"{record}:trials"
    enough = f"{den} > 0" if minimum is None else f"{den} >= {minimum}"
    return [
        {"record": den, "expr": window_count(trials, window, by, window_s=ws)},
        {
            "record": f"{record}:rate",
            "expr": f"(\n{window_count(events, window, by, window_s=ws)}\nor {den} * 0\n) / ({enough})",
        },
    ]


def feedback_rules(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    """The thumbs-down band, and the thumbs-down rate and feedback coverage (traces with any feedback /
    traces) by intent and by release over the band's window, so a rate from 3 votes reads as such."""
    w = cfg.thumbs_down.window
    down, votes = THUMBS_DOWN.events, THUMBS_DOWN.trials
    covered = 'ragmon_feedback_traces_total{kind="any"}'
    return [
        *band_rules(cfg.thumbs_down, THUMBS_DOWN),
        *share_rules("ragmon:thumbs_down_by_intent", down, votes, w, "tenant, variant, intent"),
        *share_rules("ragmon:thumbs_down_by_release", down, votes, w, "tenant, variant, release"),
        *share_rules(
            "ragmon:feedback_coverage_by_intent",
            covered,
            "ragmon_rag_queries_total",
            w,
            "tenant, variant, intent",
        ),
        *share_rules(
            "ragmon:feedback_coverage_by_release",
            covered,
            "ragmon_rag_release_queries_total",
            w,
            "tenant, variant, release",
        ),
    ]


RETRIEVAL_N = "ragmon_exclusion_retrieval_labelled_traces_total"
RETRIEVAL_SUM = "ragmon_exclusion_retrieval_score_sum_total"
RETRIEVAL_SQUARES = "ragmon_exclusion_retrieval_score_squares_total"
RETRIEVAL_GROUP = "tenant, variant, intent, stage"
RELEASE_N = "ragmon_exclusion_retrieval_release_labelled_traces_total"
RELEASE_SUM = "ragmon_exclusion_retrieval_release_score_sum_total"
RELEASE_SQUARES = "ragmon_exclusion_retrieval_release_score_squares_total"
RELEASE_GROUP = "tenant, variant, release, stage"
Z_95 = 1.959964


def retrieval_rules(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    """Per window (a `window` label) and (tenant, variant, intent, stage, metric, k): the labelled n
    (absent when 0), and from `min_n` traces the mean of the per-trace values and a normal-approximation
    95% half-width, z * sqrt(sample variance / n), from the sums and sums of squares
    (docs/retrieval-metrics.md). Below `min_n` neither exists: no data, not a number from 3 traces.
    The same per (tenant, variant, release, stage, metric, k) as `ragmon:retrieval_release:*`."""
    return [
        *_mean_rules(
            cfg, "ragmon:retrieval", (RETRIEVAL_N, RETRIEVAL_SUM, RETRIEVAL_SQUARES), RETRIEVAL_GROUP
        ),
        *_mean_rules(
            cfg, "ragmon:retrieval_release", (RELEASE_N, RELEASE_SUM, RELEASE_SQUARES), RELEASE_GROUP
        ),
    ]


def _mean_rules(
    cfg: GuardrailsConfig, record: str, counters: tuple[str, str, str], group: str
) -> list[dict[str, Any]]:
    r = cfg.retrieval
    count, sums, sum_squares = counters
    by = f"{group}, metric, k"
    on = f"on ({group}) group_left ()"
    rules: list[dict[str, Any]] = []
    for w in r.windows:
        ws = seconds(w)
        n = f'{record}:labelled{{window="{w}"}}'
        gated = f"({n} >= {r.min_n})"
        total = window_count(sums, w, by, window_s=ws)
        squares = window_count(sum_squares, w, by, window_s=ws)

        def windowed(expr: str, window: str = w) -> str:
            # The window as a label (recording rules carry no `labels:`; the k8s renderer relies on it).
            return f'label_replace(\n{expr},\n"window", "{window}", "", "")'

        rules += [
            {
                "record": f"{record}:labelled",
                "expr": windowed(f"{window_count(count, w, group, window_s=ws)} > 0"),
            },
            {"record": f"{record}:mean", "expr": windowed(f"(\n{total}\n) / {on} {gated}")},
            {
                # sample variance = (squares - sum^2 / n) / (n - 1), clamped at 0 against rounding
                "record": f"{record}:half_width",
                "expr": windowed(
                    f"{number(Z_95)} * sqrt(clamp_min(\n(\n{squares}\n- (\n{total}\n) ^ 2 / {on} {gated}\n)"
                    f" / {on} (({n} - 1) * {n}),\n0))"
                ),
            },
        ]
    return rules


FOLLOWUPS = "ragmon_feedback_followups_total"
SESSIONS_ENDED = "ragmon_feedback_sessions_ended_total"


def session_rules(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    """Reformulations / compared follow-ups and unresolved / ended sessions, by intent
    (docs/reformulations.md); a follow-up that could not be compared is in neither side."""
    r = cfg.reformulation
    by = "tenant, intent"
    return [
        *share_rules(
            "ragmon:reformulation_by_intent",
            selector(FOLLOWUPS, outcome="reformulated"),
            selector(FOLLOWUPS, outcome="=~reformulated|different"),
            r.window,
            by,
            r.min_followups,
        ),
        *share_rules(
            "ragmon:sessions_unresolved_by_intent",
            selector(SESSIONS_ENDED, outcome="!=resolved"),
            SESSIONS_ENDED,
            r.window,
            by,
            r.min_sessions,
        ),
    ]


def guardrail_alerts(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    return [
        _threshold_alert(cfg, FAITHFULNESS),
        _latency(cfg),
        _threshold_alert(cfg, FALSE_EXCLUSION),
        _exclusion_no_data(cfg),
        *(_band_alert(cfg, band) for band in BAND_ALERTS),
        _threshold_alert(cfg, PROVIDER_ERRORS),
        _threshold_alert(cfg, TRUNCATION),
        _check_failing(cfg),
        _encoder_mismatch(cfg),
        _probe_neighbours(cfg),
        _threshold_alert(cfg, COST),
        _drift(cfg),
        _leak(cfg),
    ]


def _gated(compare: str, samples: str, minimum: int, on: str = "tenant, variant") -> str:
    return f"({compare})\nand on ({on}) ({selector(samples, variant=PROD)} >= {minimum})"


def _any_of(parts: list[str]) -> str:
    return "\nor ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0]


@dataclass(frozen=True)
class Branch:
    """One branch of a threshold alert: the recorded `signal` compared, where the recorded `samples` reach
    the config field `minimum`."""

    signal: str
    samples: str
    minimum: str


@dataclass(frozen=True)
class Threshold:
    """A guardrail alert on production's recorded signal `op` the config field `threshold` of section
    `section` (per tenant where `tenants:` overrides it), from a minimum sample: the tenant's branch and,
    with `intent`, each intent's under the same name (intents.tenant_or_intents). `description` is
    written from the section's config; `guardrail` labels the alert (default: the section's name)."""

    section: str
    threshold: str
    op: str
    tenant: Branch
    intent: Branch | None
    alert: str
    severity: str
    summary: str
    description: Callable[[Any], str]
    guardrail: str = ""


def _threshold_alert(cfg: GuardrailsConfig, g: Threshold) -> dict[str, Any]:
    r = getattr(cfg, g.section)
    # {} for a field the config does not let tenants override (config.TENANT_OVERRIDABLE)
    overrides = cfg.override(g.section, g.threshold)

    def branch(b: Branch, on: str) -> str:
        compare = compare_with_overrides(b.signal, g.op, getattr(r, g.threshold), overrides, variant=PROD)
        return _gated(compare, b.samples, getattr(r, b.minimum), on)

    expr = tenant = branch(g.tenant, "tenant, variant")
    if g.intent is not None:
        expr = tenant_or_intents(tenant, branch(g.intent, by_intent.TVI))
    return _alert(
        cfg,
        g.alert,
        expr,
        r.for_,
        g.severity,
        "guardrail",
        g.summary,
        g.description(r),
        guardrail=g.guardrail or g.section,
    )


FAITHFULNESS = Threshold(
    section="faithfulness",
    threshold="min_mean_score",
    op="<",
    tenant=Branch("ragmon:faithfulness_score:mean", "ragmon:faithfulness_score:samples", "min_samples"),
    intent=Branch(by_intent.FAITHFULNESS_MEAN, by_intent.FAITHFULNESS_SAMPLES, "min_samples_per_intent"),
    alert="RagmonFaithfulnessLow",
    severity="page",
    summary="Answers of {{ $labels.tenant }}" + ON_INTENT + " stopped following their context",
    description=lambda r: (
        f'Mean HHEM faithfulness over {r.window} is {{{{ $value | printf "%.2f" }}}}, below the '
        f"tenant's floor (default {r.min_mean_score}); at least {r.min_samples} scored answers of the tenant, "
        f"or {r.min_samples_per_intent} of the intent when an intent label is set (its mean is below the "
        "floor while the tenant's is not: docs/intents.md). Dashboard Intents: faithfulness by intent."
    ),
)
FALSE_EXCLUSION = Threshold(
    section="false_exclusion",
    threshold="max_rate",
    op=">",
    tenant=Branch("ragmon:false_exclusion:rate", "ragmon:false_exclusion:eligible", "min_eligible"),
    intent=Branch(by_intent.EXCLUSION_RATE, by_intent.EXCLUSION_ELIGIBLE, "min_eligible_per_intent"),
    alert="RagmonFalseExclusionHigh",
    severity="page",
    summary="Relevance filters of {{ $labels.tenant }} are removing the right documents" + ON_INTENT,
    description=lambda r: (
        f"{{{{ $value | humanizePercentage }}}} of queries with eligible gold lost all of it to relevance "
        f"filters over {r.window} (limit {r.max_rate:.0%}, at least {r.min_eligible} eligible queries, or "
        f"{r.min_eligible_per_intent} of the intent when an intent label is set: docs/intents.md). "
        "ragmon_exclusion_predicate_exclusions_total says which predicate field removed them."
    ),
)
PROVIDER_ERRORS = Threshold(
    section="errors",
    threshold="max_rate",
    op=">",
    tenant=Branch("ragmon:errors:rate", "ragmon:errors:errored", "min_errors"),
    intent=None,
    alert="RagmonProviderErrorsHigh",
    severity="page",
    summary="Requests of {{ $labels.tenant }} are failing",
    description=lambda r: (
        f"{{{{ $value | humanizePercentage }}}} of requests failed over {r.window} (the traces' error: "
        f"timeouts, rate limits, provider 5xx, content filters, context too long; limit {number(r.max_rate)}, "
        f"at least {r.min_errors} failures). An outage, not a quality drop: failed requests are kept out of "
        "faithfulness, exclusion and latency. Dashboard Overview: errors by stage and type."
    ),
    guardrail="provider_errors",
)
TRUNCATION = Threshold(
    section="truncation",
    threshold="max_rate",
    op=">",
    tenant=Branch("ragmon:truncation:rate", "ragmon:truncation:trials", "min_answers"),
    intent=None,
    alert="RagmonTruncatedAnswersHigh",
    severity="ticket",
    summary="Answers of {{ $labels.tenant }} are being cut off",
    description=lambda r: (
        f"{{{{ $value | humanizePercentage }}}} of answers stopped at the token limit (finish_reason "
        f"length) over {r.window} (limit {number(r.max_rate)}, at least {r.min_answers} answers that gave a "
        "finish reason): users get half an answer. Dashboard Overview: finish reasons."
    ),
)
COST = Threshold(
    section="cost",
    threshold="max_mean_usd",
    op=">",
    tenant=Branch(
        "ragmon:rag_cost_per_query_usd:mean", "ragmon:rag_cost_per_query_usd:samples", "min_samples"
    ),
    intent=Branch(by_intent.COST_MEAN, by_intent.COST_SAMPLES, "min_samples_per_intent"),
    alert="RagmonCostPerQueryOverBudget",
    severity="ticket",
    summary="Cost per query of {{ $labels.tenant }}" + ON_INTENT + " is over budget",
    description=lambda r: (
        f'Mean cost per query over {r.window} is ${{{{ $value | printf "%.4f" }}}}, over the budget '
        f"(default ${r.max_mean_usd}; at least {r.min_samples} queries, or {r.min_samples_per_intent} of the "
        "intent when an intent label is set: docs/intents.md)."
    ),
)


def _latency(cfg: GuardrailsConfig) -> dict[str, Any]:
    """The threshold alert per stage: each stage's SLO (overridable per tenant), the intents' branch on the
    stages the metrics worker keeps per intent."""
    r = cfg.latency
    per_tenant = cfg.override("latency", "slo_seconds")

    def over(series: str, stages: list[str]) -> str:
        return _any_of(
            [
                compare_with_overrides(
                    series,
                    ">",
                    r.slo_seconds[stage],
                    {t: v[stage] for t, v in per_tenant.items() if stage in v},
                    variant=PROD,
                    stage=stage,
                )
                for stage in stages
            ]
        )

    tenant = _gated(
        over("ragmon:rag_stage_duration_seconds:quantile", sorted(r.slo_seconds)),
        "ragmon:rag_stage_duration_seconds:samples",
        r.min_samples,
        "tenant, variant, stage",
    )
    expr = tenant
    intent_stages = [stage for stage in by_intent.INTENT_STAGES if stage in r.slo_seconds]
    if intent_stages:
        intents = _gated(
            over(by_intent.LATENCY_QUANTILE, intent_stages),
            by_intent.LATENCY_SAMPLES,
            r.min_samples_per_intent,
            by_intent.TVI + ", stage",
        )
        expr = tenant_or_intents(tenant, intents, "tenant, variant, stage")
    q = int(round(r.quantile * 100))
    return _alert(
        cfg,
        "RagmonLatencyAboveSLO",
        expr,
        r.for_,
        "page",
        "guardrail",
        f"p{q} of stage {{{{ $labels.stage }}}} for {{{{ $labels.tenant }}}}{ON_INTENT} is over its SLO",
        f"p{q} over {r.window} is {{{{ $value | humanizeDuration }}}}, above the stage's SLO "
        f"(defaults: {', '.join(f'{k} {v}s' for k, v in sorted(r.slo_seconds.items()))}; at least "
        f"{r.min_samples} traces, or {r.min_samples_per_intent} of the intent for total and ttft per intent: "
        "docs/intents.md).",
        guardrail="latency",
    )


def _exclusion_no_data(cfg: GuardrailsConfig) -> dict[str, Any]:
    """Traces flow but no query had eligible gold: the guardrail is blind, which is not 0%."""
    r = cfg.false_exclusion
    expr = (
        f"{selector('ragmon:traces:received', variant=PROD)} > 0\n"
        f"unless on (tenant, variant) (sum by (tenant, variant) (increase("
        f'ragmon_exclusion_eligible_queries_total{{variant="{PROD}"}}[{r.no_data_for}])) > 0)'
    )
    return _alert(
        cfg,
        "RagmonFalseExclusionNoData",
        expr,
        r.no_data_grace,
        "ticket",
        "symptom",
        "No exclusion evidence for {{ $labels.tenant }}",
        f"Traces arrive but none carried an exclusion sample with eligible gold in the last {r.no_data_for} "
        "(or since ragmon started): the false-exclusion guardrail is blind (no data is not 0%).",
        # the worker that produces the evidence: Alertmanager binds its not-ready/halted alert to this one
        guardrail="false_exclusion",
        worker="exclusion",
    )


def _band_condition(rule: BandRule, s: BandSignal) -> str:
    r, tr = s.prefix, s.trials_name
    return (
        f'abs({r}rate{{variant="production"}} - {r}baseline_rate)'
        f"\n> {r}band_half_width"
        f'\nand on ({s.by}) ({r}{tr}{{variant="production"}} >= {rule.min_n})'
        f'\nand on ({s.by}) ({r}baseline_{tr}{{variant="production"}}'
        f" >= {rule.min_baseline_n})"
    )


def _band_triage_window(cfg: GuardrailsConfig, rule: BandRule) -> str:
    """A band sees a step only after its window fills enough and `for:` holds: a release up to
    window + for before the alert can be its cause, which is longer than the default release_window."""
    own = seconds(rule.window) + seconds(rule.for_)
    if seconds(cfg.release_window) >= own:
        return cfg.release_window
    return f"{int(own // 60)}m" if own % 60 == 0 else f"{int(own)}s"  # one unit: seconds() parses it


@dataclass(frozen=True)
class BandAlert:
    """A control band's alert: config section `section` (also its `guardrail` label) on `signal`. The
    description says what the share is `of`, how the band's n counts (`trials`, after the number) and
    what else to look at (`more`)."""

    section: str
    signal: BandSignal
    alert: str
    summary: str
    of: str
    trials: str = ""
    more: str = ""


BAND_ALERTS = (
    BandAlert(
        "regeneration",
        REGENERATION,
        "RagmonRegenerationOutOfBand",
        "Regeneration rate of {{ $labels.tenant }} left its control band",
        "answers users regenerated",
    ),
    BandAlert(
        "thumbs_down",
        THUMBS_DOWN,
        "RagmonThumbsDownOutOfBand",
        "Thumbs-down rate of {{ $labels.tenant }} left its control band",
        "thumbs votes that were down",
        " votes",
        " Dashboard Feedback: thumbs-down rate by intent and release.",
    ),
    BandAlert(
        "refusal",
        REFUSAL,
        "RagmonRefusalRateOutOfBand",
        "Refusal rate of {{ $labels.tenant }} on intent {{ $labels.intent }} left its control band",
        "queries of this intent the app refused",
        " queries of the intent",
        " A rise on one intent is the usual sign of a stale corpus or of a filter hiding that intent's"
        " documents; a fall, of answers given without support. Dashboard Quality: refusals by intent.",
    ),
)


def _band_alert(cfg: GuardrailsConfig, band: BandAlert) -> dict[str, Any]:
    r: BandRule = getattr(cfg, band.section)
    return _alert(
        cfg,
        band.alert,
        _band_condition(r, band.signal),
        r.for_,
        "ticket",
        "guardrail",
        band.summary,
        f'The share of {band.of} over {r.window} moved {{{{ $value | printf "%.3f" }}}} '
        f"from its baseline ({r.baseline_window} ending {r.baseline_offset} ago), more than "
        f"{number(r.sigmas)}·√(p̄(1−p̄)(1/n + 1/n_b)) (p̄ pooled, n ≥ {r.min_n}{band.trials}, "
        f"baseline n_b ≥ {r.min_baseline_n}{band.trials})." + band.more,
        triage_within=_band_triage_window(cfg, r),
        guardrail=band.section,
    )


def _check_failing(cfg: GuardrailsConfig) -> dict[str, Any]:
    r = cfg.checks
    parts = [
        f'ragmon:check:rate{{variant="{PROD}", check="{check}"}} > {number(limit)}'
        for check, limit in sorted(r.max_rates.items())
    ]
    rest = "|".join(sorted(r.max_rates))
    parts.append(
        f'ragmon:check:rate{{variant="{PROD}", check!~"{rest}"}} > {number(r.max_rate)}'
        if rest
        else f'ragmon:check:rate{{variant="{PROD}"}} > {number(r.max_rate)}'
    )
    limits = ", ".join(f"{k} {number(v)}" for k, v in sorted(r.max_rates.items()))
    return _alert(
        cfg,
        "RagmonAnswerCheckFailing",
        _gated(_any_of(parts), "ragmon:check:trials", r.min_checked, "tenant, variant, check"),
        r.for_,
        "ticket",
        "guardrail",
        "Check {{ $labels.check }} fails on answers of {{ $labels.tenant }}",
        f"{{{{ $value | humanizePercentage }}}} of the answers the deterministic check {{{{ $labels.check }}}} "
        f"applied to failed it over {r.window} (limit {number(r.max_rate)}; {limits}; at least "
        f"{r.min_checked} checked answers). docs/checks.md says what each check catches. Dashboard Quality: "
        "answer checks.",
        guardrail="checks",
    )


def _encoder_mismatch(cfg: GuardrailsConfig) -> dict[str, Any]:
    """Paged on the first trace whose query and index were embedded by different models (the recorded count
    includes a series' first sample, so a mismatch on a tenant's first traffic is seen too)."""
    return _alert(
        cfg,
        "RagmonEncoderMismatch",
        f'ragmon:encoder_mismatch:count{{variant="{PROD}"}} > 0',
        "0m",
        "page",
        "guardrail",
        "Queries of {{ $labels.tenant }} are embedded by another model than their index",
        f"{{{{ $value }}}} traces in the last {ENCODER_WINDOW} searched an index built with one embedding model "
        "using a query embedded by another (query.embedding_model != retrieval.index_embedding_model): vectors "
        "of different models are not comparable, so retrieval returns garbage while every score looks normal. "
        "A half-done embedding migration: roll the query encoder or the index back together.",
        guardrail="encoder_mismatch",
    )


def _probe_neighbours(cfg: GuardrailsConfig) -> dict[str, Any]:
    """A probe set's neighbours moved away from its pinned baseline without a declared change (a release
    re-pins the baseline: docs/probes.md), over at least min_probes compared probes."""
    r = cfg.probes
    return _alert(
        cfg,
        "RagmonProbeNeighboursChanged",
        f'ragmon:probe_overlap:ratio{{variant="{PROD}"}} < {number(r.min_overlap)}\n'
        f"and on ({PROBE_SERIES}, variant) "
        f'(ragmon:probe_compared:queries{{variant="{PROD}"}} >= {r.min_probes})',
        r.for_,
        "ticket",
        "guardrail",
        "Probe set {{ $labels.probe_set }} of {{ $labels.tenant }} retrieves other neighbours than its baseline",
        "The replayed probes of set {{ $labels.probe_set }} (embedding model {{ $labels.embedding_model }}, "
        "index {{ $labels.index_version }}) overlap their pinned baseline's top k by {{ $value | humanizePercentage }} "
        f"on average (floor {number(r.min_overlap)}), and no release declared a change: a provider-side model "
        "change, an index rebuilt or re-chunked, or data drift under the same names. "
        "`ragmon probes report` compares the versions.",
        guardrail="probes",
    )


def _drift(cfg: GuardrailsConfig) -> dict[str, Any]:
    return _alert(
        cfg,
        "RagmonQueryDrift",
        "max by (tenant, signal, intent, model) (ragmon_drift_detected) == 1",
        cfg.drift.for_,
        "ticket",
        "guardrail",
        "Queries of {{ $labels.tenant }} drifted from the reference window ({{ $labels.signal }})",
        "The MMD² permutation test rejects 'same distribution' for signal {{ $labels.signal }} "
        "(model {{ $labels.model }}). See ragmon_drift_mmd2 and ragmon_drift_p_value_ratio.",
        guardrail="drift",
    )


def _leak(cfg: GuardrailsConfig) -> dict[str, Any]:
    return _alert(
        cfg,
        "RagmonEntitlementLeak",
        "sum by (tenant, kind) (increase(ragmon_exclusion_leaks_total[10m])) > 0",
        "0m",
        "page",
        "security",
        "A document outside {{ $labels.tenant }}'s entitlement reached retrieval ({{ $labels.kind }})",
        "A candidate or context document violates an entitlement predicate (tenant, authorization, "
        "jurisdiction). Paged on the first one: this is a security event, not a quality drift.",
        guardrail="entitlement",
    )


def shadow_alerts(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    """Candidates are judged, never paged: category `candidate` routes to the candidate's owners."""
    return [
        _alert(
            cfg,
            "RagmonShadowCandidateWorse",
            'max by (tenant, candidate, metric) (ragmon_shadow_verdict{verdict="worse"}) == 1',
            cfg.shadow.for_,
            "ticket",
            "candidate",
            "Candidate {{ $labels.candidate }} of {{ $labels.tenant }} is worse than production on "
            "{{ $labels.metric }}",
            "The anytime-valid paired comparison (Holm-corrected across metrics; latency and cost as "
            "non-inferiority) says the candidate is worse on the same requests. "
            "`ragmon shadow report --tenant {{ $labels.tenant }} --candidate {{ $labels.candidate }}` "
            "has the pairs, intervals and slices.",
        ),
        _alert(
            cfg,
            "RagmonShadowCoverageOff",
            "max by (tenant, candidate) (ragmon_shadow_coverage_mismatch_detected) == 1",
            cfg.shadow.for_,
            "ticket",
            "candidate",
            "Shadow coverage of {{ $labels.candidate }} ({{ $labels.tenant }}) is far from its configured rate",
            "The configured shadow rate lies outside the exact binomial interval of paired / production "
            "requests: twins are lost (the candidate fails, its traces are not sent, request ids differ) "
            "or the app shadows more or less than configured. The comparison still holds for the pairs "
            "it has, but they may not represent production.",
        ),
    ]


def pipeline_alerts(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    p = cfg.pipeline
    a = _alert
    return [
        a(
            cfg,
            "RagmonTargetDown",
            'up{job=~".*ragmon.*"} == 0',
            p.target_down_for,
            "page",
            "pipeline",
            "ragmon target {{ $labels.job }} ({{ $labels.instance }}) is down",
            "Prometheus cannot scrape it: its metrics and guardrails are blind.",
        ),
        a(
            cfg,
            "RagmonBrokerUnavailable",
            "max by (instance) (ragmon_api_broker_up) == 0",
            "1m",
            "page",
            "pipeline",
            "The API cannot reach the Kafka broker",
            "Ingestion answers 503: apps must retry; nothing is accepted.",
        ),
        a(
            cfg,
            "RagmonWorkerHalted",
            "max by (worker, reason, instance) (ragmon_worker_halted) == 1",
            "0m",
            "page",
            "pipeline",
            "Worker {{ $labels.worker }} halted ({{ $labels.reason }})",
            "The dead-letter limit stopped the worker to avoid draining its topic: likely a bad deploy.",
        ),
        a(
            cfg,
            "RagmonWorkerNotReady",
            "max by (worker, instance) (ragmon_worker_ready) == 0",
            p.not_ready_for,
            "page",
            "pipeline",
            "Worker {{ $labels.worker }} is not consuming",
            "Not ready: a model that did not load, or an outage it keeps retrying. Its log says which.",
        ),
        a(
            cfg,
            "RagmonScorerDown",
            "max by (instance) (ragmon_faithfulness_scorer_up) == 0",
            p.not_ready_for,
            "page",
            "pipeline",
            "The faithfulness scorer is down",
            "The HHEM model did not load: no faithfulness scores, so the faithfulness guardrail is blind.",
        ),
        a(
            cfg,
            "RagmonConsumerLag",
            f"sum by (worker) (ragmon_worker_consumer_lag_messages) > {p.max_lag_messages}",
            p.lag_for,
            "ticket",
            "symptom",
            "Worker {{ $labels.worker }} is {{ $value }} records behind",
            "Processing is slower than traffic: scale the worker (up to the partition count) or find the slow batch.",
        ),
        # Any dead letter is worth a ticket at once; the short window clears it soon after they stop.
        a(
            cfg,
            "RagmonDeadLetters",
            f"sum by (worker, reason) (increase(ragmon_worker_dead_letters_total[{p.dead_letter_window}])) > 0",
            "0m",
            "ticket",
            "pipeline",
            "Worker {{ $labels.worker }} dead-lettered records ({{ $labels.reason }})",
            f"Records that could not be decoded or validated went to the DLQ topic in the last {p.dead_letter_window}, "
            "with their reason in headers.",
        ),
        a(
            cfg,
            "RagmonNoTraffic",
            f'sum by (tenant) (increase(ragmon_api_events_accepted_total{{type="trace"}}[{p.no_traffic_for}])) == 0',
            "0m",
            "ticket",
            "symptom",
            "No traces from {{ $labels.tenant }} for " + p.no_traffic_for,
            "The tenant's app stopped sending (or its sampling went to zero): every guardrail of it is blind.",
        ),
        # Shedding now (a 1m rate) by API instance (the one whose broker is unreachable), sustained for
        # shed_for: a pause shorter than shed_for - 1m that recovered never fires, and the alert clears
        # about a minute after shedding stops.
        a(
            cfg,
            "RagmonIngestShedding",
            "sum by (instance) (rate(ragmon_api_shed_total[1m])) > 0",
            p.shed_for,
            "ticket",
            "symptom",
            "The API ({{ $labels.instance }}) is answering 503",
            f"Requests have been shed for {p.shed_for} (broker down or too many events awaiting acknowledgement); "
            "apps retry with backoff.",
        ),
    ]


def otlp_alerts(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    """The OTLP path: assembler (late spans, dropped traces), span forwarder and Phoenix exporter (failing,
    refused). Their consumer lag is RagmonConsumerLag's (the runtime's lag metric, worker label)."""
    p = cfg.pipeline
    w = p.otlp_window
    spans = f'sum(increase(ragmon_assembler_spans_total{{outcome=~"stored|late"}}[{w}]))'
    late = (
        f'sum(rate(ragmon_assembler_spans_total{{outcome="late"}}[{w}])) '
        f'/ sum(rate(ragmon_assembler_spans_total{{outcome=~"stored|late"}}[{w}])) > {number(p.max_late_span_ratio)}'
        f" and on () {spans} >= {p.min_assembled_spans}"
    )
    finished = (
        f"(sum(increase(ragmon_assembler_traces_dropped_total[{w}])) "
        f"+ (sum(increase(ragmon_assembler_traces_emitted_total[{w}])) or vector(0)))"
    )
    dropped = (
        f"sum by (reason) (increase(ragmon_assembler_traces_dropped_total[{w}])) / on () group_left () "
        f"{finished} > {number(p.max_dropped_trace_ratio)} and on () {finished} >= {p.min_assembled_traces}"
    )

    def failing(requests: str, worker: str) -> str:
        return (
            f'label_replace(sum(rate({requests}{{outcome="unavailable"}}[5m])) > 0 '
            f'unless sum(rate({requests}{{outcome="ok"}}[5m])) > 0, "worker", "{worker}", "", "")'
        )

    def refused(counter: str, worker: str) -> str:
        return (
            f'label_replace(sum(increase({counter}{{outcome="rejected"}}[5m])) > 0, '
            f'"worker", "{worker}", "", "")'
        )

    a = _alert
    return [
        a(
            cfg,
            "RagmonOtlpLateSpans",
            late,
            p.otlp_for,
            "ticket",
            "symptom",
            "{{ $value | humanizePercentage }} of OTLP spans arrive after their trace was assembled",
            f"Over {w}, more than {number(p.max_late_span_ratio * 100)}% of the spans the assembler consumed came after "
            "their trace's event was produced: counted, not in the event (missing documents, tokens or timings). "
            "The app exports a trace in pieces further apart than assembler.quiet_period_s: raise it.",
        ),
        a(
            cfg,
            "RagmonOtlpTracesDropped",
            dropped,
            p.otlp_for,
            "ticket",
            "symptom",
            "{{ $value | humanizePercentage }} of OTLP traces are dropped ({{ $labels.reason }})",
            f"Over {w}, more than {number(p.max_dropped_trace_ratio * 100)}% of the traces the assembler finished "
            "were dropped for this reason instead of becoming trace events: every guardrail misses them.",
        ),
        a(
            cfg,
            "RagmonExportFailing",
            f"{failing('ragmon_forwarder_requests_total', 'forwarder')} or "
            f"{failing('ragmon_phoenix_requests_total', 'phoenix')} or "
            f"{failing('ragmon_evaluations_requests_total', 'evaluations')}",
            p.export_failing_for,
            "ticket",
            "pipeline",
            "Worker {{ $labels.worker }} cannot reach its collector",
            f"For {p.export_failing_for} every request failed (down, timeout, 429/5xx, 401/403): the worker "
            "retries the batch with backoff, nothing is lost, but its lag grows.",
        ),
        a(
            cfg,
            "RagmonExportRefused",
            f"{refused('ragmon_forwarder_spans_total', 'forwarder')} or "
            f"{refused('ragmon_phoenix_annotations_total', 'phoenix')} or "
            f"{refused('ragmon_evaluations_records_total', 'evaluations')}",
            "0m",
            "ticket",
            "pipeline",
            "Worker {{ $labels.worker }}'s collector refused data for good",
            "The collector answered 400/404/413/422 in the last 5m: those spans, annotations or evaluation "
            "records are counted as rejected and not sent again. The worker log has the collector's answer.",
        ),
    ]


def review_alerts(cfg: GuardrailsConfig) -> list[dict[str, Any]]:
    r = cfg.review
    limit = int(seconds(r.max_blind_backlog_age))
    return [
        _alert(
            cfg,
            "RagmonReviewBacklogStale",
            f'max by (tenant) (ragmon_review_oldest_waiting_duration_seconds{{stratum="blind"}}) > {limit}',
            r.for_,
            "ticket",
            "review",
            "The blind review sample of {{ $labels.tenant }} waits longer than " + r.max_blind_backlog_age,
            "Its oldest blind-sample item is {{ $value | humanizeDuration }} old: the unbiased check of the judges "
            "(calibration, prediction-powered faithful rate) is going stale. Add reviewers or lower review.blind_rate.",
        )
    ]


def render(cfg: GuardrailsConfig) -> dict[str, Any]:
    return {
        "groups": [
            {"name": "ragmon-recording", "rules": recording_rules(cfg)},
            {"name": "ragmon-guardrails", "rules": guardrail_alerts(cfg)},
            {"name": "ragmon-shadow", "rules": shadow_alerts(cfg)},
            {"name": "ragmon-pipeline", "rules": pipeline_alerts(cfg)},
            {"name": "ragmon-otlp", "rules": otlp_alerts(cfg)},
            {"name": "ragmon-review", "rules": review_alerts(cfg)},
        ]
    }
