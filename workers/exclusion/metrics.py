"""Prometheus metrics of the exclusion worker.

The rates are derived in PromQL so they aggregate across worker processes:

    sum by (tenant, source) (rate(ragmon_exclusion_falsely_excluded_queries_total[1h]))
      / (sum by (tenant, source) (rate(ragmon_exclusion_eligible_queries_total[1h])) > 0)

The `> 0` filter keeps a window without eligible queries absent (no data)
rather than NaN or 0. Whenever a label set's denominator series is created
its numerator series is created with it at 0, so a healthy filter reads 0%
rather than no data.

Every label comes from a closed set: tenants from the API key
configuration, intents from the configured list, variants and predicate
fields capped per tenant (first seen, first kept), sources, kinds, reasons
and operators fixed in code.

The retrieval metrics (docs/retrieval-metrics.md) are exported as three
counters per (tenant, variant, intent, stage[, metric, k]): the sum of the
per-trace values, the sum of their squares, and the labelled traces n; the
recording rules derive the mean and a normal-approximation interval from them.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter

from workers.exclusion.config import ExclusionConfig
from workers.exclusion.evaluate import QueryOutcome
from workers.exclusion.retrieval import STAGES, series_keys
from workers.runtime.labels import ClosedSet, FirstSeenCap

QUERY_LABELS = ("tenant", "variant", "source", "intent")
LEAK_KINDS = ("candidate", "context")
LABEL_OUTCOMES = ("applied", "waiting", "duplicate", "no_gold_ids")
RETRIEVAL_LABELS = ("tenant", "variant", "intent", "stage")


class ExclusionMetrics:
    def __init__(self, registry: CollectorRegistry, config: ExclusionConfig) -> None:
        self._intent = ClosedSet(config.intents)
        self._variant = FirstSeenCap(config.max_variants)
        self._field = FirstSeenCap(config.max_extra_predicate_fields, always=config.predicate_fields)

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        self.samples = counter(
            "ragmon_exclusion_samples_total",
            "Exclusion samples evaluated, with or without eligible gold",
            QUERY_LABELS,
        )
        self.eligible_queries = counter(
            "ragmon_exclusion_eligible_queries_total",
            "Evaluated queries with at least one entitled gold document",
            QUERY_LABELS,
        )
        self.excluded_queries = counter(
            "ragmon_exclusion_falsely_excluded_queries_total",
            "Queries whose entitled gold was all removed by relevance filters",
            QUERY_LABELS,
        )
        self.eligible_gold = counter(
            "ragmon_exclusion_eligible_gold_documents_total",
            "Entitled gold documents evaluated",
            QUERY_LABELS,
        )
        self.excluded_gold = counter(
            "ragmon_exclusion_excluded_gold_documents_total",
            "Entitled gold documents removed by relevance filters",
            QUERY_LABELS,
        )
        self.predicate_exclusions = counter(
            "ragmon_exclusion_predicate_exclusions_total",
            "Excluded gold documents by a relevance predicate they fail (one per document and predicate); "
            "intent is left out to bound field x op x intent cardinality",
            ("tenant", "variant", "source", "field", "op"),
        )
        self.ineligible_gold = counter(
            "ragmon_exclusion_ineligible_gold_documents_total",
            "Gold ids left out of both rates: reason not_entitled (violates entitlement) or not_in_sample",
            ("tenant", "source", "reason"),
        )
        self.leaks = counter(
            "ragmon_exclusion_leaks_total",
            "Documents that violate an entitlement predicate (security event)",
            ("tenant", "kind"),
        )
        self.unverified = counter(
            "ragmon_exclusion_unverified_documents_total",
            "Documents whose metadata lacks an entitlement predicate's field, so no leak check was possible",
            ("tenant", "kind"),
        )
        self.labels = counter(
            "ragmon_exclusion_labels_total", "Label events by what they did", ("tenant", "outcome")
        )
        self.retrieval_sum = counter(
            "ragmon_exclusion_retrieval_score_sum_total",
            "Sum over labelled traces of a retrieval metric's per-trace value (stage: candidates or context; "
            "k: the cut-off, 'all' for MRR)",
            (*RETRIEVAL_LABELS, "metric", "k"),
        )
        self.retrieval_squares = counter(
            "ragmon_exclusion_retrieval_score_squares_total",
            "Sum over labelled traces of the squared per-trace value (the interval's variance)",
            (*RETRIEVAL_LABELS, "metric", "k"),
        )
        self.retrieval_traces = counter(
            "ragmon_exclusion_retrieval_labelled_traces_total",
            "Traces whose retrieval metrics were counted: entitled gold from labels (never proxy gold)",
            RETRIEVAL_LABELS,
        )
        self._retrieval_keys = series_keys(config.retrieval_ks)
        self._tenants_seen: set[str] = set()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def touch_tenant(self, tenant: str) -> None:
        """Create the tenant's leak series at 0: an alert on increase() only sees a
        counter's first increment when the series existed before it."""
        if tenant not in self._tenants_seen:
            self._tenants_seen.add(tenant)
            for kind in LEAK_KINDS:
                self.leaks.labels(tenant, kind)

    def record_query(self, tenant: str, variant: str, intent: str | None, outcome: QueryOutcome) -> None:
        variant_label = self._variant(tenant, variant)
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
        self, tenant: str, variant: str, intent: str | None, values: dict[str, dict[tuple[str, str], float]]
    ) -> None:
        """One labelled trace: per stage, n += 1 and each (metric, k)'s value and its square."""
        group = (tenant, self._variant(tenant, variant), self._intent(intent))
        for stage in STAGES:
            stage_values = values[stage]
            labels = (*group, stage)
            self._child(self.retrieval_traces, labels).inc()
            for metric, k in self._retrieval_keys:
                value = stage_values[(metric, k)]
                self._child(self.retrieval_sum, (*labels, metric, k)).inc(value)
                self._child(self.retrieval_squares, (*labels, metric, k)).inc(value * value)

    def _child(self, counter: Counter, labels: tuple[str, ...]) -> Any:
        # Counter.labels() validates and locks on every call; one sample touches
        # several counters, so the children are kept (label sets are closed).
        key = (id(counter), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = counter.labels(*labels)
        return child

    def record_documents(self, tenant: str, kind: str, leaks: int, unverified: int) -> None:
        if leaks:
            self.leaks.labels(tenant, kind).inc(leaks)
        if unverified:
            self.unverified.labels(tenant, kind).inc(unverified)

    def record_label(self, tenant: str, outcome: str) -> None:
        self.labels.labels(tenant, outcome).inc()
