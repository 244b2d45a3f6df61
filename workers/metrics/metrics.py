"""Metrics of the metrics worker: latency, cost, tokens, queries, feedback, releases."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.runtime.families import Families
from workers.runtime.labels import families_with

# RAG stages run from a millisecond (a cache hit) to a minute (a long generation).
STAGE_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    0.75,
    1,
    1.5,
    2,
    3,
    5,
    8,
    13,
    20,
    30,
    60,
)
# Cost per query in USD: from a cached embedding lookup to a long reasoning answer.
COST_BUCKETS = (
    0.00001,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
)

# Seconds a user stayed on an answer: a glance (under 5 s) to a long read.
DWELL_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600)

TV = ["tenant", "variant"]
# The stages whose duration is also kept per intent: what the user waits for. Per-stage latency stays
# per (tenant, variant) only, so an intent adds 2 histograms, not one per stage (docs/intents.md).
INTENT_STAGES = ("total", "ttft")


class MetricsWorkerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        f = Families(registry)
        self.stage_seconds = f.histogram(
            "ragmon_rag_stage_duration_seconds",
            "Duration of each RAG stage, TTFT and total, per trace",
            [*TV, "stage"],
            buckets=STAGE_BUCKETS,
        )
        self.intent_seconds = f.histogram(
            "ragmon_rag_intent_duration_seconds",
            "Total duration and TTFT per trace, by intent (the per-intent latency guardrail)",
            [*TV, "intent", "stage"],
            buckets=STAGE_BUCKETS,
        )
        self.queries = f.counter(
            "ragmon_rag_queries_total", "Traces observed (sampled), by intent", [*TV, "intent"]
        )
        self.queries_estimated = f.counter(
            "ragmon_rag_queries_estimated_total",
            "Traces re-weighted by 1/sample_rate: estimated real traffic",
            [*TV, "intent"],
        )
        self.refusals = f.counter(
            "ragmon_rag_refusals_total", "Answers the app marked as refusals", [*TV, "intent"]
        )
        self.uncited = f.counter(
            "ragmon_rag_uncited_answers_total", "Non-refused answers with no citation", [*TV, "intent"]
        )
        self.cited = f.counter(
            "ragmon_rag_cited_answers_total",
            "Non-refused answers with at least one citation (the citation click-through's denominator)",
            [*TV, "intent"],
        )
        self.errors = f.counter(
            "ragmon_rag_errors_total",
            "Traces whose request failed (the trace's error), by the failing stage and the error type; such a "
            "trace counts here and in tokens and spend, in no quality or latency signal",
            [*TV, "intent", "stage", "type"],
        )
        self.finish_reasons = f.counter(
            "ragmon_rag_finish_reasons_total",
            "Answers by the generation's finish reason (length: truncated by the token limit)",
            [*TV, "intent", "reason"],
        )
        self.encoder_mismatch = f.counter(
            "ragmon_rag_encoder_mismatch_total",
            "Traces whose query was embedded by another model than the one the searched index was built with "
            "(query.embedding_model != retrieval.index_embedding_model): retrieval returns garbage silently",
            TV,
        )
        self.checks = f.counter(
            "ragmon_rag_check_results_total",
            "Deterministic answer checks by outcome (pass, fail, skip: does not apply), docs/checks.md",
            [*TV, "intent", "check", "outcome"],
        )
        self.feedback_on_errors = f.counter(
            "ragmon_feedback_on_errored_traces_total",
            "Feedback on a trace whose request failed: kept out of the feedback quality rates",
            [*TV, "kind"],
        )
        self.release_queries = f.counter(
            "ragmon_rag_release_queries_total",
            "Traces observed (sampled), by release (the per-release feedback rates' denominator)",
            [*TV, "release"],
        )
        self.cost_per_query = f.histogram(
            "ragmon_rag_cost_per_query_usd",
            "Cost of one query in USD (reported or estimated)",
            [*TV, "source"],
            buckets=COST_BUCKETS,
        )
        self.intent_cost_usd = f.counter(
            "ragmon_rag_intent_cost_usd_total",
            "Cost in USD of the queries with a known cost (reported or estimated), by intent: the per-intent "
            "mean cost's numerator",
            [*TV, "intent"],
        )
        self.intent_costed_queries = f.counter(
            "ragmon_rag_intent_costed_queries_total",
            "Queries with a known cost (reported or estimated), by intent: the per-intent mean cost's denominator",
            [*TV, "intent"],
        )
        self.cost_queries = f.counter(
            "ragmon_rag_cost_queries_total",
            "Traces by cost source (reported, estimated, unknown)",
            [*TV, "source"],
        )
        self.cost_estimated_usd = f.counter(
            "ragmon_rag_cost_estimated_usd_total",
            "Cost re-weighted by 1/sample_rate: estimated real spend",
            [*TV, "source"],
        )
        self.tokens = f.counter(
            "ragmon_rag_tokens_total", "Tokens used, by kind and model", [*TV, "kind", "model"]
        )
        self.feedback = f.counter(
            "ragmon_feedback_total",
            "Feedback joined to its trace's variant, release and intent",
            [*TV, "release", "intent", "kind", "reason"],
        )
        self.thumbs = f.counter(
            "ragmon_feedback_thumbs_total",
            "Thumbs feedback by direction (up, down), joined like ragmon_feedback_total; a changed vote is "
            "two events, both counted",
            [*TV, "release", "intent", "direction"],
        )
        self.feedback_traces = f.counter(
            "ragmon_feedback_traces_total",
            "Traces with at least one feedback of this kind (kind=any: of any kind), counted at the first one",
            [*TV, "release", "intent", "kind"],
        )
        self.dwell_seconds = f.histogram(
            "ragmon_feedback_dwell_duration_seconds",
            "Seconds users stayed on an answer (dwell feedback)",
            [*TV, "intent"],
            buckets=DWELL_BUCKETS,
        )
        self.feedback_parked = f.counter(
            "ragmon_feedback_parked_total",
            "Feedback that arrived before its trace and waited for it",
            ["tenant"],
        )
        self.feedback_unjoined = f.counter(
            "ragmon_feedback_unjoined_total",
            "Feedback whose trace never arrived within the wait",
            ["tenant", "kind", "reason"],
        )
        self.release_info = f.gauge(
            "ragmon_release_info", "The current release per tenant and variant (value 1)", [*TV, "release"]
        )
        self.release_timestamp = f.gauge(
            "ragmon_release_last_timestamp_seconds", "Unix time of the last release marker", TV
        )
        self.component_change = f.gauge(
            "ragmon_release_component_change_timestamp_seconds",
            "Unix time of the latest change of a component per tenant (one series per tenant and component:"
            " from and to the versions, source declared by a release marker or detected in traces)",
            ["tenant", "component", "from", "to", "source"],
        )
        self.detected_changes = f.counter(
            "ragmon_release_detected_changes_total",
            "Component changes this replica detected in production traces (each change counted once overall)",
            ["tenant", "component"],
        )
        self.folded = f.counter(
            "ragmon_rag_label_values_folded_total",
            "Label values a per-tenant cap folded into 'other', by label (variant, release): a tenant sending "
            "more distinct values than its cap (docs/series-budget.md)",
            ["tenant", "label"],
        )
        # The series a variant or release that left the window takes with it (docs/series-budget.md). The
        # release-marker gauges are not here: they follow the markers kept in Redis (_refresh_releases).
        markers = (self.release_info, self.release_timestamp)
        families = list(vars(self).values())
        self.variant_families = families_with(families, "variant", exclude=markers)
        self.release_families = families_with(families, "release", exclude=markers)
