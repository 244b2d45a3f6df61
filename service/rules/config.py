"""Section `guardrails` of the ragmon config: thresholds, SLOs, budgets, windows, per tenant.

Rules are rendered from this (`ragmon rules render`), so changing a threshold
never means hand-editing PromQL, and a tenant override is one YAML line.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, field_validator

from service.contracts.vocabulary import CheckName

DURATION = re.compile(r"^[0-9]+(ms|s|m|h|d|w)$")


def _duration(v: str) -> str:
    if not DURATION.match(v):
        raise ValueError(f"{v!r} is not a Prometheus duration like 30s, 10m, 1h, 1d")
    return v


Duration = Annotated[str, AfterValidator(_duration)]


def seconds(duration: str) -> float:
    value, unit = (
        int(duration[:-2] if duration.endswith("ms") else duration[:-1]),
        re.sub(r"^[0-9]+", "", duration),
    )
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]


class Strict(BaseModel):
    model_config = {"extra": "forbid", "populate_by_name": True}


def _per_intent_minimum(default: int, counted: str, statistic: str = "mean") -> Any:
    """The field `min_*_per_intent`: an intent's own statistic pages only once its window holds this many."""
    return Field(
        default,
        ge=1,
        description=f"{counted} of one intent in the window before its own {statistic} can page",
    )


class MeanRule(Strict):
    """A mean per tenant and per intent over `window` against a limit (faithfulness, cost)."""

    window: Duration = "30m"
    min_samples: int = Field(20, ge=1)
    for_: Duration = Field("10m", alias="for")


class FaithfulnessRule(MeanRule):
    min_mean_score: float = Field(0.5, ge=0, le=1, description="page when the mean HHEM score falls below")
    min_samples_per_intent: int = _per_intent_minimum(30, "scored answers")


class LatencyRule(Strict):
    quantile: float = Field(0.95, gt=0, lt=1)
    window: Duration = "10m"
    min_samples: int = Field(20, ge=1)
    min_samples_per_intent: int = _per_intent_minimum(50, "traces", "p95 (total, ttft)")
    for_: Duration = Field("5m", alias="for")
    slo_seconds: dict[str, float] = Field(
        default_factory=lambda: {
            "total": 8.0,
            "ttft": 2.5,
            "retrieval": 1.0,
            "rerank": 1.0,
            "generation": 6.0,
            "postprocess": 0.5,
        }
    )


class ExclusionRule(Strict):
    max_rate: float = Field(0.2, gt=0, le=1, description="falsely excluded / eligible queries")
    window: Duration = "1h"
    min_eligible: int = Field(20, ge=1)
    min_eligible_per_intent: int = _per_intent_minimum(20, "eligible queries", "rate")
    for_: Duration = Field("10m", alias="for")
    no_data_for: Duration = Field("2h", description="alert when traces flow but no query had eligible gold")
    no_data_grace: Duration = Field("15m", description="how long that must hold (also right after a start)")


class BandRule(Strict):
    """A two-sample control band on a share (docs/regeneration-band.md): x events of n trials in the
    current window against x_b of n_b in a baseline window that ends `baseline_offset` ago."""

    window: Duration = "1h"
    baseline_window: Duration = "1d"
    baseline_offset: Duration = Field("1h", description="the baseline ends this long before now")
    min_n: int = Field(50, ge=1, description="minimum trials in the current window")
    min_baseline_n: int = Field(
        1000, ge=1, description="no alert before the baseline window holds this many trials"
    )
    sigmas: float = Field(3.0, gt=0)
    # 30m, not 15m: at 3 sigma a 15m hold fired 0.05-0.08 times a day per tenant on stationary
    # traffic; 30m keeps it near 0.01 and still sees a doubling within 2h (docs/regeneration-band.md).
    for_: Duration = Field("30m", alias="for")


class RegenerationRule(BandRule):
    """Regenerations of answered queries (trials: queries)."""


class ThumbsDownRule(BandRule):
    """Thumbs down of thumbs votes (trials: votes, up and down). Votes are a fraction of queries, so the
    minimums are smaller than the regeneration band's (docs/thumbs-down-band.md has the measured rates)."""

    min_n: int = Field(30, ge=1, description="minimum thumbs votes in the current window")
    min_baseline_n: int = Field(
        300, ge=1, description="no alert before the baseline window holds this many votes"
    )


class RefusalRule(BandRule):
    """Refusals of queries per (tenant, intent): a refusal rate that creeps up on one intent is how a stale
    corpus or a filter that hides that intent's documents shows itself. Per intent the counts are thinner
    than the tenant's, so the band is wider (3.5 sigma) and the minimums are per intent
    (docs/refusal-band.md has the measured false-alarm rates and power)."""

    min_n: int = Field(50, ge=1, description="minimum queries of the intent in the current window")
    min_baseline_n: int = Field(
        500, ge=1, description="no alert before the intent's baseline window holds this many queries"
    )
    sigmas: float = Field(3.5, gt=0)


class ErrorRule(Strict):
    """Failed requests (the trace's error) of all requests (docs/errors.md): an outage, not a quality drop."""

    max_rate: float = Field(0.05, gt=0, le=1, description="errored / (errored + answered) requests")
    window: Duration = "10m"
    min_errors: int = Field(20, ge=1, description="no alert on fewer failed requests in the window")
    for_: Duration = Field("5m", alias="for")


class TruncationRule(Strict):
    """Answers cut by the token limit (finish_reason length) of the answers that gave a finish reason."""

    max_rate: float = Field(0.05, gt=0, le=1, description="length / answers with a finish reason")
    window: Duration = "30m"
    min_answers: int = Field(50, ge=1, description="minimum answers with a finish reason in the window")
    for_: Duration = Field("10m", alias="for")


class ReformulationRule(Strict):
    """Reformulations of follow-ups and unresolved sessions per (tenant, intent) (docs/reformulations.md).
    Below the minimum count a rate is no data, not a number: 1 reformulation of 3 follow-ups says little."""

    window: Duration = "1h"
    min_followups: int = Field(
        20, ge=1, description="no reformulation rate below this many compared follow-ups"
    )
    min_sessions: int = Field(
        20, ge=1, description="no unresolved-session share below this many ended sessions"
    )


CHECK_LIMITS: dict[CheckName, float] = {"figures_grounded": 0.15, "forbidden_patterns": 0.001}


def _check_limits() -> dict[CheckName, float]:
    return dict(CHECK_LIMITS)


class CheckRule(Strict):
    """Failures of a deterministic answer check of the answers it applied to (docs/checks.md)."""

    max_rate: float = Field(0.05, gt=0, le=1, description="failed / checked (pass + fail) answers, any check")
    max_rates: dict[CheckName, Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=_check_limits,
        description="per-check limits: figures the answer computed fail too; one forbidden pattern is too many",
    )
    window: Duration = "30m"
    min_checked: int = Field(50, ge=1, description="minimum answers the check applied to in the window")
    for_: Duration = Field("10m", alias="for")


class CostRule(MeanRule):
    max_mean_usd: float = Field(0.05, gt=0, description="budget for the mean cost per query")
    min_samples_per_intent: int = _per_intent_minimum(30, "costed queries")


class DriftRule(Strict):
    for_: Duration = Field("10m", alias="for")


class ShadowRule(Strict):
    """A candidate's anytime-valid verdict says worse: a ticket for the candidate's owners, never a page."""

    for_: Duration = Field("15m", alias="for")


class PipelineRule(Strict):
    target_down_for: Duration = "2m"
    max_lag_messages: int = Field(10_000, ge=1)
    lag_for: Duration = "10m"
    dead_letter_window: Duration = Field(
        "2m", description="RagmonDeadLetters clears this long after the last one"
    )
    not_ready_for: Duration = "5m"
    no_traffic_for: Duration = "15m"
    shed_for: Duration = Field(
        "3m", description="shedding this long opens a ticket; a shorter pause that recovers never does"
    )
    # OTLP: the assembler, the span forwarder and the Phoenix exporter (docs/otlp.md, docs/phoenix.md)
    otlp_window: Duration = Field("30m", description="window of the late-span and dropped-trace shares")
    otlp_for: Duration = Field("15m", description="how long a share stays over its limit before a ticket")
    max_late_span_ratio: float = Field(
        0.02,
        gt=0,
        le=1,
        description="late spans (after their trace's event) per span consumed: quiet period too short",
    )
    min_assembled_spans: int = Field(
        200, ge=1, description="spans in the window before the late share counts"
    )
    max_dropped_trace_ratio: float = Field(
        0.2, gt=0, le=1, description="OTLP traces dropped for one reason per trace finished"
    )
    min_assembled_traces: int = Field(
        50, ge=1, description="traces finished in the window before the share counts"
    )
    export_failing_for: Duration = Field(
        "10m", description="forwarder or Phoenix exporter: every request failing this long opens a ticket"
    )


class ReviewRule(Strict):
    max_blind_backlog_age: Duration = Field(
        "3d", description="ticket when the oldest blind-sample item waits longer"
    )
    for_: Duration = Field("1h", alias="for")


class ProbeRule(Strict):
    """Probe sets (docs/probes.md): a drop of neighbour overlap against the pinned baseline, without a declared
    change (a declared one re-pins the baseline, so it never drops here)."""

    min_overlap: float = Field(
        0.7, gt=0, le=1, description="ticket when the mean overlap@k of a set's probes falls below"
    )
    min_probes: int = Field(10, ge=1, description="probes compared with a baseline before the mean counts")
    for_: Duration = Field("15m", alias="for")


TENANT_OVERRIDABLE = {
    "faithfulness": ("min_mean_score",),
    "latency": ("slo_seconds",),
    "false_exclusion": ("max_rate",),
    "cost": ("max_mean_usd",),
}


class RetrievalRule(Strict):
    """The online retrieval metrics (docs/retrieval-metrics.md): recorded per window, not alerted on."""

    windows: list[Duration] = Field(
        default_factory=lambda: ["1h", "1d"],
        min_length=1,
        max_length=4,
        description="a mean, its labelled n and its 95% half-width are recorded over each window",
    )
    min_n: int = Field(
        30,
        ge=2,
        description="labelled traces of a (tenant, variant, intent, stage) in the window before its mean "
        "and half-width exist (below it: no data, label more)",
    )

    @field_validator("windows")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"windows must be distinct, got {v}")
        return v


class GuardrailsConfig(Strict):
    release_window: Duration = Field("30m", description="triage: a release this recent suggests a regression")
    runbook_base_url: str = Field(
        "deploy/runbooks.md",
        min_length=1,
        description="where the runbook is served (e.g. your repository's URL of deploy/runbooks.md); "
        "each alert links to its section, <base>#<alert name in lower case>",
    )
    faithfulness: FaithfulnessRule = Field(default_factory=FaithfulnessRule)
    latency: LatencyRule = Field(default_factory=LatencyRule)
    false_exclusion: ExclusionRule = Field(default_factory=ExclusionRule)
    regeneration: RegenerationRule = Field(default_factory=RegenerationRule)
    thumbs_down: ThumbsDownRule = Field(default_factory=ThumbsDownRule)
    refusal: RefusalRule = Field(default_factory=RefusalRule)
    errors: ErrorRule = Field(default_factory=ErrorRule)
    truncation: TruncationRule = Field(default_factory=TruncationRule)
    checks: CheckRule = Field(default_factory=CheckRule)
    reformulation: ReformulationRule = Field(default_factory=ReformulationRule)
    cost: CostRule = Field(default_factory=CostRule)
    drift: DriftRule = Field(default_factory=DriftRule)
    shadow: ShadowRule = Field(default_factory=ShadowRule)
    pipeline: PipelineRule = Field(default_factory=PipelineRule)
    review: ReviewRule = Field(default_factory=ReviewRule)
    probes: ProbeRule = Field(default_factory=ProbeRule)
    retrieval: RetrievalRule = Field(default_factory=RetrievalRule)
    tenants: dict[str, dict[str, dict[str, Any]]] = Field(
        default_factory=dict, description="per-tenant overrides: {tenant: {guardrail: {field: value}}}"
    )

    @field_validator("tenants")
    @classmethod
    def _overridable(cls, v: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
        for tenant, rails in v.items():
            for rail, fields in rails.items():
                allowed = TENANT_OVERRIDABLE.get(rail)
                if allowed is None:
                    raise ValueError(
                        f"{tenant}.{rail}: no per-tenant overrides; overridable: {sorted(TENANT_OVERRIDABLE)}"
                    )
                bad = sorted(set(fields) - set(allowed))
                if bad:
                    raise ValueError(
                        f"{tenant}.{rail}.{bad[0]}: not overridable per tenant; allowed: {list(allowed)}"
                    )
        return v

    def override(self, rail: str, field: str) -> dict[str, Any]:
        """{tenant: value} for one overridable field."""
        return {t: rails[rail][field] for t, rails in self.tenants.items() if field in rails.get(rail, {})}
