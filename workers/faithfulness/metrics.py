"""Every Prometheus metric of the faithfulness worker.

Coverage is read from counters, not from a ratio gauge, because ratios of
several workers cannot be summed: coverage = rate(scored_total) /
rate(eligible_total), and skipped_total{reason} says where the rest went.
`tenant` comes from the API key configuration (the API only admits configured
tenants), `variant` is capped per tenant within a window (the N most recently
seen, the rest 'other'; a variant's series go when it leaves the window,
docs/series-budget.md), everything else is a fixed enum.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.runtime.families import Families, at_zero
from workers.runtime.labels import families_with, prune

TENANT_VARIANT = ("tenant", "variant")
SKIP_REASONS = ("sampled_out", "over_budget", "no_context", "hypothesis_too_long", "failed_check")
NO_CLAIMS_REASONS = ("refused", "empty")
ERROR_STAGES = ("inference",)
PAIR_SOURCES = ("model", "cache")
# HHEM scores pile up near both ends; finer buckets there keep quantiles honest.
SCORE_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 1.0)
# One forward pass of flan-t5-base's encoder on CPU: tens of milliseconds for a short
# pair, tens of seconds for a large padded batch of long premises.
INFERENCE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
# A trace's share of model time: one pair, or one pair per sentence.
SCORING_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class FaithfulnessMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        f = Families(registry, TENANT_VARIANT)
        self.traces = f.counter(
            "ragmon_faithfulness_traces_total", "Trace events seen by the faithfulness worker"
        )
        self.eligible = f.counter(
            "ragmon_faithfulness_eligible_total", "Traces with claims (a non-empty, non-refused answer)"
        )
        self.errored = f.counter(
            "ragmon_faithfulness_errored_traces_total",
            "Traces whose request failed (the trace's error): neither scored nor eligible, never unfaithful",
        )
        self.no_claims = f.counter(
            "ragmon_faithfulness_no_claims_total",
            "Refused or empty answers: counted, never scored",
            (*TENANT_VARIANT, "reason"),
        )
        self.skipped = f.counter(
            "ragmon_faithfulness_skipped_total",
            "Eligible traces not scored, by reason",
            (*TENANT_VARIANT, "reason"),
        )
        self.scored = f.counter("ragmon_faithfulness_scored_total", "Traces scored")
        self.below_threshold = f.counter(
            "ragmon_faithfulness_below_threshold_total", "Scored traces below their tenant's threshold"
        )
        self.truncated = f.counter(
            "ragmon_faithfulness_truncated_total", "Scored traces whose premise was cut to the token budget"
        )
        self.truncated_tokens = f.counter(
            "ragmon_faithfulness_truncated_tokens_total", "Premise tokens cut by the budget"
        )
        self.scored_tokens = f.counter(
            "ragmon_faithfulness_scored_tokens_total", "Prompt tokens run through the model"
        )
        self.errors = f.counter(
            "ragmon_faithfulness_errors_total",
            "Traces in batches whose scoring failed (retried)",
            (*TENANT_VARIANT, "stage"),
        )
        self.score = f.histogram(
            "ragmon_faithfulness_score_ratio",
            "Trace faithfulness: HHEM P(consistent) (answer mode) or supported-sentence fraction (sentences mode), "
            "by the trace's intent (the configured set, the rest 'other', none 'none')",
            (*TENANT_VARIANT, "intent"),
            buckets=SCORE_BUCKETS,
        )
        self.scoring_seconds = f.histogram(
            "ragmon_faithfulness_scoring_duration_seconds",
            "Model time attributed to one trace (its pairs' shares of their forward passes)",
            buckets=SCORING_BUCKETS,
        )
        self.inference_seconds = f.histogram(
            "ragmon_faithfulness_inference_duration_seconds",
            "Duration of one forward pass (a micro-batch of pairs)",
            (),
            buckets=INFERENCE_BUCKETS,
        )
        self.padded_tokens = f.counter(
            "ragmon_faithfulness_padded_tokens_total",
            "Tokens computed by forward passes, padding included (compare with scored_tokens_total)",
            (),
        )
        self.pairs = f.counter(
            "ragmon_faithfulness_pairs_total", "(premise, hypothesis) pairs scored, by source", ("source",)
        )
        self.scorer_up = f.gauge(
            "ragmon_faithfulness_scorer_up",
            "1 when the HHEM model is loaded and scoring, 0 when it failed to load",
            (),
        )
        self.model_load_failures = f.counter(
            "ragmon_faithfulness_model_load_failures_total", "Failed attempts to load the HHEM model", ()
        )
        self.model_info = f.gauge(
            "ragmon_faithfulness_model_info", "The loaded model (value 1)", ("revision", "mode")
        )
        self.sample_rate = f.gauge(
            "ragmon_faithfulness_sample_rate_ratio", "Configured share of request ids scored", ("tenant",)
        )
        self.threshold = f.gauge(
            "ragmon_faithfulness_threshold_ratio", "Configured score threshold", ("tenant",)
        )
        self.folded = f.counter(
            "ragmon_faithfulness_label_values_folded_total",
            "Label values a per-tenant cap folded into 'other', by label (variant): docs/series-budget.md",
            ["tenant", "label"],
        )
        self._touched: set[tuple[str, str]] = set()
        self._variant_families = families_with(vars(self).values(), "variant")
        # Series that exist from the start read as 0, not as "no data", in alert expressions.
        at_zero(self.pairs, each=PAIR_SOURCES)
        self.scorer_up.set(0)

    def touch(self, tenant: str, variant: str) -> None:
        """Create a (tenant, variant)'s counters at 0 when it is first seen.

        An alert on rate(below_threshold_total) / rate(scored_total) then reads
        0 for a healthy variant instead of "no data", and the skipped reasons
        that never happened show as 0 beside those that did.
        """
        if (tenant, variant) in self._touched:
            return
        self._touched.add((tenant, variant))
        for counter in (
            self.traces,
            self.errored,
            self.eligible,
            self.scored,
            self.below_threshold,
            self.truncated,
            self.truncated_tokens,
            self.scored_tokens,
        ):
            counter.labels(tenant, variant)
        at_zero(self.no_claims, tenant, variant, each=NO_CLAIMS_REASONS)
        at_zero(self.skipped, tenant, variant, each=SKIP_REASONS)
        at_zero(self.errors, tenant, variant, each=ERROR_STAGES)

    def forget(self, tenant: str, variant: str) -> None:
        """A variant that left the window: its series are no longer exported."""
        prune(self._variant_families, {"tenant": tenant, "variant": variant})
        self._touched.discard((tenant, variant))

    def inference(self, seconds: float, padded_tokens: int) -> None:
        self.inference_seconds.observe(seconds)
        self.padded_tokens.inc(padded_tokens)

    def model_loaded(self, revision: str, mode: str) -> None:
        self.model_info.clear()
        self.model_info.labels(revision, mode).set(1)
        self.scorer_up.set(1)

    def model_failed(self) -> None:
        self.model_load_failures.inc()
        self.scorer_up.set(0)
