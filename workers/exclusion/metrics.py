"""Prometheus metrics of the exclusion worker.

The rates are derived in PromQL so they aggregate across worker processes:

    sum by (tenant, source) (rate(ragmon_exclusion_falsely_excluded_queries_total[1h]))
      / (sum by (tenant, source) (rate(ragmon_exclusion_eligible_queries_total[1h])) > 0)

The `> 0` filter keeps a window without eligible queries absent (no data)
rather than NaN or 0. Whenever a label set's denominator series is created
its numerator series is created with it at 0, so a healthy filter reads 0%
rather than no data.

Every label comes from a closed set: tenants from the API key
configuration, intents from the configured list, predicate fields capped per
tenant (first seen, first kept), variants capped per tenant within a window
(the series of a variant no sample named for `variant_window_s` are removed,
docs/series-budget.md), sources, kinds, reasons and operators fixed in code.

The retrieval metrics (docs/retrieval-metrics.md) are exported as three
counters per (tenant, variant, intent, stage[, metric, k]): the sum of the
per-trace values, the sum of their squares, and the labelled traces n; the
recording rules derive the mean and a normal-approximation interval from them.
The same three per (tenant, variant, release, stage[, metric, k]), without
intent, so a release reads against the one before it: releases capped per
tenant within a window like variants (`max_releases`, `release_window_s`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from workers.exclusion.config import ExclusionConfig
from workers.exclusion.evaluate import QueryOutcome
from workers.exclusion.retrieval import STAGES, series_keys
from workers.runtime.families import Families, at_zero
from workers.runtime.labels import NONE, Children, ClosedSet, FirstSeenCap, WindowedCap, families_with, prune

QUERY_LABELS = ("tenant", "variant", "source", "intent")
LEAK_KINDS = ("candidate", "context")
LABEL_OUTCOMES = ("applied", "waiting", "duplicate", "no_gold_ids")
RETRIEVAL_LABELS = ("tenant", "variant", "intent", "stage")
# The same per release (a release against the one before it), without intent: series stay a few hundred
# per (tenant, variant) however many intents there are.
RELEASE_LABELS = ("tenant", "variant", "release", "stage")
RETRIEVAL_KEYS = ("metric", "k")  # of each value a labelled trace adds to the sums (series_keys)
SWEEP_S = 60.0  # how often the series of variants that left the window are looked for


class ExclusionMetrics:
    def __init__(
        self, registry: CollectorRegistry, config: ExclusionConfig, clock: Callable[[], float] = time.time
    ) -> None:
        self._intent = ClosedSet(config.intents)
        self._clock = clock
        self._next_sweep = clock() + SWEEP_S
        self._variant = WindowedCap(
            config.max_variants,
            config.variant_window_s,
            always=("production",),
            on_fold=lambda tenant: self._child(self.folded, (tenant, "variant")).inc(),
        )
        self._release = WindowedCap(
            config.max_releases,
            config.release_window_s,
            always=(NONE,),
            on_fold=lambda tenant: self._child(self.folded, (tenant, "release")).inc(),
        )
        self._field = FirstSeenCap(config.max_extra_predicate_fields, always=config.predicate_fields)

        f = Families(registry, QUERY_LABELS)
        self.samples = f.counter(
            "ragmon_exclusion_samples_total", "Exclusion samples evaluated, with or without eligible gold"
        )
        self.eligible_queries = f.counter(
            "ragmon_exclusion_eligible_queries_total",
            "Evaluated queries with at least one entitled gold document",
        )
        self.excluded_queries = f.counter(
            "ragmon_exclusion_falsely_excluded_queries_total",
            "Queries whose entitled gold was all removed by relevance filters",
        )
        self.eligible_gold = f.counter(
            "ragmon_exclusion_eligible_gold_documents_total", "Entitled gold documents evaluated"
        )
        self.excluded_gold = f.counter(
            "ragmon_exclusion_excluded_gold_documents_total",
            "Entitled gold documents removed by relevance filters",
        )
        self.predicate_exclusions = f.counter(
            "ragmon_exclusion_predicate_exclusions_total",
            "Excluded gold documents by a relevance predicate they fail (one per document and predicate); "
            "intent is left out to bound field x op x intent cardinality",
            ("tenant", "variant", "source", "field", "op"),
        )
        self.ineligible_gold = f.counter(
            "ragmon_exclusion_ineligible_gold_documents_total",
            "Gold ids left out of both rates: reason not_entitled (violates entitlement) or not_in_sample",
            ("tenant", "source", "reason"),
        )
        self.leaks = f.counter(
            "ragmon_exclusion_leaks_total",
            "Documents that violate an entitlement predicate (security event)",
            ("tenant", "kind"),
        )
        self.unverified = f.counter(
            "ragmon_exclusion_unverified_documents_total",
            "Documents whose metadata lacks an entitlement predicate's field, so no leak check was possible",
            ("tenant", "kind"),
        )
        self.labels = f.counter(
            "ragmon_exclusion_labels_total", "Label events by what they did", ("tenant", "outcome")
        )
        self.retrieval_sum, self.retrieval_squares, self.retrieval_traces = f.moments(
            RETRIEVAL_LABELS,
            RETRIEVAL_KEYS,
            sums=(
                "ragmon_exclusion_retrieval_score_sum_total",
                "Sum over labelled traces of a retrieval metric's per-trace value (stage: candidates or context; "
                "k: the cut-off, 'all' for MRR)",
            ),
            squares=(
                "ragmon_exclusion_retrieval_score_squares_total",
                "Sum over labelled traces of the squared per-trace value (the interval's variance)",
            ),
            count=(
                "ragmon_exclusion_retrieval_labelled_traces_total",
                "Traces whose retrieval metrics were counted: entitled gold from labels (never proxy gold)",
            ),
        )
        self.release_sum, self.release_squares, self.release_traces = f.moments(
            RELEASE_LABELS,
            RETRIEVAL_KEYS,
            sums=(
                "ragmon_exclusion_retrieval_release_score_sum_total",
                "The retrieval score sums by release (release: the trace's, capped per tenant; none: it named none)",
            ),
            squares=(
                "ragmon_exclusion_retrieval_release_score_squares_total",
                "The squared per-trace values by release",
            ),
            count=(
                "ragmon_exclusion_retrieval_release_labelled_traces_total",
                "Traces whose retrieval metrics were counted, by release",
            ),
        )
        self.folded = f.counter(
            "ragmon_exclusion_label_values_folded_total",
            "Label values a per-tenant cap folded into 'other', by label (variant, release): docs/series-budget.md",
            ("tenant", "label"),
        )
        self._retrieval_keys = series_keys(config.retrieval_ks)
        self._tenants_seen: set[str] = set()
        self._children = Children()
        self._variant_families = families_with(vars(self).values(), "variant")
        self._release_families = families_with(vars(self).values(), "release")

    def _variant_label(self, tenant: str, variant: str) -> str:
        now = self._clock()
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_S
            self.sweep(now)
        return self._variant(tenant, variant, now)

    def sweep(self, now: float) -> None:
        """Remove the series of the variants no sample named within the window."""
        for tenant, variant in self._variant.expire(now):
            prune(self._variant_families, {"tenant": tenant, "variant": variant}, self._children)
        for tenant, release in self._release.expire(now):
            prune(self._release_families, {"tenant": tenant, "release": release}, self._children)

    def touch_tenant(self, tenant: str) -> None:
        """Create the tenant's leak series at 0: an alert on increase() only sees a
        counter's first increment when the series existed before it."""
        if tenant not in self._tenants_seen:
            self._tenants_seen.add(tenant)
            at_zero(self.leaks, tenant, each=LEAK_KINDS)

    def record_query(self, tenant: str, variant: str, intent: str | None, outcome: QueryOutcome) -> None:
        variant_label = self._variant_label(tenant, variant)
        labels = (tenant, variant_label, outcome.source, self._intent(intent))
        self._child(self.samples, labels).inc()
        if outcome.eligible:
            # The numerators are touched with the denominator, so their series exist (at 0).
            self._child(self.eligible_queries, labels).inc()
            self._child(self.excluded_queries, labels).inc(1 if outcome.falsely_excluded else 0)
            self._child(self.eligible_gold, labels).inc(len(outcome.eligible_gold))
            self._child(self.excluded_gold, labels).inc(len(outcome.excluded))
        for predicates in outcome.excluded.values():
            for ref in predicates:
                field = self._field(tenant, ref.field)
                attribution = (tenant, variant_label, outcome.source, field, ref.op)
                self._child(self.predicate_exclusions, attribution).inc()
        if outcome.not_entitled:
            self.ineligible_gold.labels(tenant, outcome.source, "not_entitled").inc(outcome.not_entitled)
        if outcome.not_in_sample:
            self.ineligible_gold.labels(tenant, outcome.source, "not_in_sample").inc(outcome.not_in_sample)

    def record_retrieval(
        self,
        tenant: str,
        variant: str,
        intent: str | None,
        values: dict[str, dict[tuple[str, str], float]],
        release: str | None = None,
    ) -> None:
        """One labelled trace: per stage, n += 1 and each (metric, k)'s value and its square, per intent and
        per release."""
        variant_label = self._variant_label(tenant, variant)
        release_label = self._release(tenant, release, self._clock()) if release else NONE
        by_intent = (tenant, variant_label, self._intent(intent))
        by_release = (tenant, variant_label, release_label)
        for stage in STAGES:
            stage_values = values[stage]
            for group, n, sums, squares in (
                (by_intent, self.retrieval_traces, self.retrieval_sum, self.retrieval_squares),
                (by_release, self.release_traces, self.release_sum, self.release_squares),
            ):
                labels = (*group, stage)
                self._child(n, labels).inc()
                for metric, k in self._retrieval_keys:
                    value = stage_values[(metric, k)]
                    self._child(sums, (*labels, metric, k)).inc(value)
                    self._child(squares, (*labels, metric, k)).inc(value * value)

    def _child(self, counter: Counter, labels: tuple[str, ...]) -> Any:
        # Counter.labels() validates and locks on every call; one sample touches several counters.
        return self._children(counter, *labels)

    def record_documents(self, tenant: str, kind: str, leaks: int, unverified: int) -> None:
        if leaks:
            self.leaks.labels(tenant, kind).inc(leaks)
        if unverified:
            self.unverified.labels(tenant, kind).inc(unverified)

    def record_label(self, tenant: str, outcome: str) -> None:
        self.labels.labels(tenant, outcome).inc()
