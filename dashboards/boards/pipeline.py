"""ragmon's own health: ingestion API, Kafka produce, workers' consumption, dead letters, readiness."""

from __future__ import annotations

from dashboards.common import Board, Limits, p95_panel, quantile_lines
from dashboards.model import Panel, Row, Target, bad_above
from dashboards.panels import (
    counter,
    failures_panel,
    per_second_panel,
    seconds_panel,
    stat,
    timeseries,
    up_stat,
)
from dashboards.promql import TENANT, TV, per_second, quantile, zero_when_absent
from service.rules.config import PipelineRule

UID = "ragmon-pipeline"


def _api() -> list[Panel]:
    return [
        per_second_panel(
            "API requests by route and status",
            counter("ragmon_api_requests_total", "route, status", "{{route}} {{status}}"),
            width=12,
        ),
        p95_panel(
            "API p95 latency by route", "ragmon_api_request_duration_seconds", "route", "{{route}}", width=12
        ),
        per_second_panel(
            "Events accepted by type",
            counter("ragmon_api_events_accepted_total", "type", "{{type}}", TENANT),
            description="Durably acknowledged by Kafka (acks=all) before the API answered 2xx.",
        ),
        per_second_panel(
            "Events rejected by reason",
            counter("ragmon_api_events_rejected_total", "type, reason", "{{type}} {{reason}}", zero="reason"),
        ),
        seconds_panel(
            "Produce latency (send to broker ack)", *quantile_lines("ragmon_api_produce_duration_seconds")
        ),
        per_second_panel(
            "Requests shed with 503, by reason",
            counter("ragmon_api_shed_total", "reason", "{{reason}}", zero="reason"),
            description="Broker unreachable or too many events awaiting acknowledgement: apps retry with backoff.",
        ),
        per_second_panel(
            "Requests limited with 429, by tenant",
            counter("ragmon_api_rate_limited_total", "tenant", "{{tenant}}", TENANT, zero="tenant"),
        ),
        timeseries(
            "Events awaiting broker acknowledgement",
            Target("sum(ragmon_api_inflight_events)", "in flight"),
            decimals=0,
        ),
    ]


def _dependencies() -> list[Panel]:
    return [
        up_stat("Broker reachable", Target("min(ragmon_api_broker_up)", "broker"), width=6, height=5),
        up_stat("Redis reachable", Target("min(ragmon_api_redis_up)", "redis"), width=6, height=5),
        up_stat(
            "Scrape targets up", Target('sum by (job) (up{job=~".*ragmon.*"})', "{{job}}"), width=12, height=5
        ),
    ]


def _workers(limits: Limits) -> list[Panel]:
    pipe = limits.guardrails.pipeline
    return [
        per_second_panel(
            "Worker events by outcome",
            counter("ragmon_worker_events_total", "worker, outcome", "{{worker}} {{outcome}}"),
            description="processed, duplicate (an event id already done: at-least-once redelivery), dead_letter.",
            stacked=False,
            width=12,
        ),
        timeseries(
            f"Consumer lag (alert above {pipe.max_lag_messages})",
            Target("sum by (worker) (ragmon_worker_consumer_lag_messages)", "{{worker}}"),
            thresholds=bad_above(pipe.max_lag_messages),
            decimals=0,
            width=12,
        ),
        failures_panel(
            "Dead letters by reason",
            counter(
                "ragmon_worker_dead_letters_total",
                "worker, reason",
                "{{worker}} {{reason}}",
                zero="reason",
                fn="increase",
            ),
            description="Records that could not be decoded or validated, sent to the DLQ topic with their reason.",
        ),
        up_stat(
            "Workers ready",
            Target("min by (worker) (ragmon_worker_ready)", "{{worker}}"),
            description="0: not consuming (a model that did not load, an outage being retried, or halted).",
            mappings=(("0", "not ready", "red"), ("1", "ready", "green")),
        ),
        stat(
            "Workers halted",
            Target(
                zero_when_absent("max by (worker, reason) (ragmon_worker_halted)", "worker"),
                "{{worker}} {{reason}}",
            ),
            description="The dead-letter ratio limit stopped a worker rather than drain its topic into the DLQ.",
            thresholds=bad_above(1),
            mappings=(("0", "running", "green"), ("1", "halted", "red")),
        ),
        per_second_panel(
            "Label values folded into other, by worker and label",
            *(
                counter(
                    f"ragmon_{worker}_label_values_folded_total",
                    "tenant, label",
                    f"{{{{tenant}}}} {{{{label}}}} ({worker})",
                    TENANT,
                    zero="label",
                )
                for worker in ("rag", "faithfulness", "exclusion")
            ),
            description="A release or variant beyond its per-tenant cap (within its window) is counted as `other`: "
            "a tenant with more live releases or candidates than the budget allows, or one sending garbage "
            "label values (docs/series-budget.md). rag: the metrics worker.",
            stacked=False,
            width=24,
        ),
    ]


def _worker_timing() -> list[Panel]:
    return [
        p95_panel(
            "Event delay p95 (API receipt to commit)",
            "ragmon_worker_ingest_to_commit_duration_seconds",
            "worker",
            "{{worker}}",
        ),
        p95_panel("Batch duration p95", "ragmon_worker_batch_duration_seconds", "worker", "{{worker}}"),
        per_second_panel(
            "Retries on outages",
            counter("ragmon_worker_retries_total", "worker, error", "{{worker}} {{error}}", zero="error"),
            description="Batches that failed on Redis, Kafka or a model timeout and were retried (never dead-lettered).",
            stacked=False,
        ),
    ]


def _scorer() -> list[Panel]:
    return [
        up_stat("Faithfulness scorer up", Target("min(ragmon_faithfulness_scorer_up)", "HHEM"), width=6),
        p95_panel(
            "HHEM forward pass p95", "ragmon_faithfulness_inference_duration_seconds", "", "p95", width=6
        ),
        timeseries(
            "Padding overhead of forward passes",
            Target(
                f"{per_second('ragmon_faithfulness_padded_tokens_total', '')} / "
                f"({per_second('ragmon_faithfulness_scored_tokens_total', '', TV)} > 0)",
                "padded / scored tokens",
            ),
            description="Tokens computed, padding included, per prompt token scored: above ~2 long and short "
            "premises share batches.",
            decimals=2,
            width=6,
        ),
        failures_panel(
            "Model load failures",
            counter("ragmon_faithfulness_model_load_failures_total", "", "failures", zero="", fn="increase"),
            width=6,
        ),
        per_second_panel(
            "Scored pairs by source",
            counter("ragmon_faithfulness_pairs_total", "source", "{{source}}"),
            description="`cache`: a premise/answer pair seen before, not run through the model again.",
            width=12,
        ),
        per_second_panel(
            "Scoring errors by stage",
            counter("ragmon_faithfulness_errors_total", "stage", "{{stage}}", TV, zero="stage"),
            stacked=False,
            width=12,
        ),
    ]


def _exporter(name: str, component: str, items: str, intro: str, pipe: PipelineRule) -> Panel:
    """An OTLP exporter's items and its requests to the collector, by outcome (the two share their outcomes)."""
    return per_second_panel(
        f"{name}: {items} and requests by outcome",
        counter(f"ragmon_{component}_{items}_total", "outcome", items + " {{outcome}}"),
        counter(f"ragmon_{component}_requests_total", "outcome", "requests {{outcome}}"),
        description=f"{intro}unavailable: retried with backoff (a ticket when every request fails for "
        f"{pipe.export_failing_for}); rejected: refused for good by the collector (a ticket).",
        stacked=False,
    )


def _otlp(limits: Limits) -> list[Panel]:
    """The OTLP path: assembler (spans -> trace events), span forwarder and Phoenix exporter. Their consumer
    lag is on the workers' lag panel (worker assembler, forwarder, phoenix)."""
    pipe = limits.guardrails.pipeline
    return [
        per_second_panel(
            "Assembler spans by outcome",
            counter("ragmon_assembler_spans_total", "outcome", "{{outcome}}"),
            description=f"stored, duplicate (a redelivery), overflow (over a trace's cap), late (after the trace's "
            f"event: a ticket above {pipe.max_late_span_ratio:.0%} of spans), feedback, dead_letter.",
            stacked=False,
        ),
        per_second_panel(
            "OTLP traces: events produced and drops by reason",
            counter("ragmon_assembler_traces_emitted_total", "", "trace events", TENANT),
            counter("ragmon_assembler_traces_dropped_total", "reason", "dropped {{reason}}", zero="reason"),
            description=f"A ticket when one reason takes more than {pipe.max_dropped_trace_ratio:.0%} of the "
            "finished traces (docs/otlp.md lists the reasons).",
            stacked=False,
        ),
        per_second_panel(
            "OTLP log records (POST /v1/logs): accepted, rejected, and what the assembler did",
            counter("ragmon_api_otlp_log_records_accepted_total", "", "accepted", TENANT),
            counter("ragmon_api_otlp_log_records_rejected_total", "reason", "rejected {{reason}}"),
            counter("ragmon_assembler_log_records_total", "outcome", "assembler {{outcome}}"),
            description="GenAI message events sent as log records (docs/otlp.md, POST /v1/logs). Rejected: "
            "no trace or span id (not emitted inside a span). joined: folded into its span's messages; "
            "late: its trace was already assembled; no_span / no_trace: its span or trace never came; "
            "unread: an event ragmon does not read. Empty when the app sends messages as span attributes.",
            stacked=False,
        ),
        timeseries(
            "Open traces and assembly delay p95",
            Target("sum(ragmon_assembler_pending_traces)", "open traces"),
            Target(quantile(0.95, "ragmon_assembler_assembly_delay_duration_seconds", ""), "delay p95 (s)"),
            description="Traces waiting in Redis for their root span or quiet period; delay from the root span "
            "ending to the trace event being produced (about the quiet period when healthy).",
            decimals=1,
        ),
        _exporter("Span forwarder", "forwarder", "spans", "", pipe),
        per_second_panel(
            "Phoenix exporter: annotations by kind and outcome",
            counter("ragmon_phoenix_annotations_total", "kind, outcome", "{{kind}} {{outcome}}"),
            description="sent, rejected, trace_not_found (the trace never reached Phoenix), untraceable, "
            "document_not_found, waiting_full.",
            stacked=False,
        ),
        timeseries(
            "Phoenix exporter: requests, failed attempts, waiting scores",
            counter("ragmon_phoenix_requests_total", "endpoint, outcome", "{{endpoint}} {{outcome}}"),
            counter("ragmon_phoenix_annotation_failures_total", "kind", "retried {{kind}}", zero="kind"),
            Target("sum(ragmon_phoenix_waiting_events)", "waiting scores"),
            description="Failed attempts are annotations of a write that failed on a Phoenix outage and was "
            "retried; waiting scores wait in Redis for their trace to reach Phoenix.",
            decimals=1,
        ),
        _exporter(
            "Evaluation exporter",
            "evaluations",
            "records",
            "gen_ai.evaluation.result log records (docs/otlp.md, Evaluations out). ",
            pipe,
        ),
    ]


def build(limits: Limits) -> Board:
    return Board(
        UID,
        "ragmon / Pipeline health",
        "The monitor's own health: when this is red, the guardrails are blind. Ingestion (API, Kafka produce, "
        "shedding), consumption (lag, dead letters, readiness, halts), the faithfulness scorer and the OTLP path "
        "(assembler, span forwarder, Phoenix exporter).",
        [
            Row("Ingestion API", _api()),
            Row("Dependencies", _dependencies()),
            Row("Workers", [*_workers(limits), *_worker_timing()]),
            Row("Faithfulness scorer", _scorer()),
            Row("OTLP: assembler, span forwarder, Phoenix exporter", _otlp(limits)),
        ],
        tags=("pipeline",),
    )
