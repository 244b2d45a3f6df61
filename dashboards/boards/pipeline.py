"""ragmon's own health: ingestion API, Kafka produce, workers' consumption, dead letters, readiness."""

from __future__ import annotations

from dashboards.common import Board, Limits
from dashboards.model import Panel, Row, Target, bad_above, bad_below
from dashboards.promql import TENANT, TV, per_second, quantile, zero_when_absent

UID = "ragmon-pipeline"
UP_DOWN = (("0", "down", "red"), ("1", "up", "green"))


def _api() -> list[Panel]:
    return [
        Panel(
            "API requests by route and status",
            "timeseries",
            [Target(per_second("ragmon_api_requests_total", "route, status", ""), "{{route}} {{status}}")],
            unit="reqps",
            stacked=True,
            width=12,
        ),
        Panel(
            "API p95 latency by route",
            "timeseries",
            [Target(quantile(0.95, "ragmon_api_request_duration_seconds", "route"), "{{route}}")],
            unit="s",
            width=12,
        ),
        Panel(
            "Events accepted by type",
            "timeseries",
            [Target(per_second("ragmon_api_events_accepted_total", "type", TENANT), "{{type}}")],
            description="Durably acknowledged by Kafka (acks=all) before the API answered 2xx.",
            unit="reqps",
            stacked=True,
            width=8,
        ),
        Panel(
            "Events rejected by reason",
            "timeseries",
            [
                Target(
                    zero_when_absent(
                        per_second("ragmon_api_events_rejected_total", "type, reason", ""), "reason"
                    ),
                    "{{type}} {{reason}}",
                )
            ],
            unit="reqps",
            stacked=True,
            width=8,
        ),
        Panel(
            "Produce latency (send to broker ack)",
            "timeseries",
            [
                Target(quantile(q, "ragmon_api_produce_duration_seconds", ""), f"p{round(q * 100)}")
                for q in (0.5, 0.95, 0.99)
            ],
            unit="s",
            width=8,
        ),
        Panel(
            "Requests shed with 503, by reason",
            "timeseries",
            [
                Target(
                    zero_when_absent(per_second("ragmon_api_shed_total", "reason", ""), "reason"),
                    "{{reason}}",
                )
            ],
            description="Broker unreachable or too many events awaiting acknowledgement: apps retry with backoff.",
            unit="reqps",
            stacked=True,
            width=8,
        ),
        Panel(
            "Requests limited with 429, by tenant",
            "timeseries",
            [
                Target(
                    zero_when_absent(per_second("ragmon_api_rate_limited_total", "tenant", TENANT), "tenant"),
                    "{{tenant}}",
                )
            ],
            unit="reqps",
            stacked=True,
            width=8,
        ),
        Panel(
            "Events awaiting broker acknowledgement",
            "timeseries",
            [Target("sum(ragmon_api_inflight_events)", "in flight")],
            decimals=0,
            width=8,
        ),
    ]


def _dependencies() -> list[Panel]:
    return [
        Panel(
            "Broker reachable",
            "stat",
            [Target("min(ragmon_api_broker_up)", "broker")],
            thresholds=bad_below(1),
            mappings=UP_DOWN,
            width=6,
            height=5,
        ),
        Panel(
            "Redis reachable",
            "stat",
            [Target("min(ragmon_api_redis_up)", "redis")],
            thresholds=bad_below(1),
            mappings=UP_DOWN,
            width=6,
            height=5,
        ),
        Panel(
            "Scrape targets up",
            "stat",
            [Target('sum by (job) (up{job=~".*ragmon.*"})', "{{job}}")],
            thresholds=bad_below(1),
            mappings=UP_DOWN,
            width=12,
            height=5,
        ),
    ]


def _workers(limits: Limits) -> list[Panel]:
    pipe = limits.guardrails.pipeline
    return [
        Panel(
            "Worker events by outcome",
            "timeseries",
            [
                Target(
                    per_second("ragmon_worker_events_total", "worker, outcome", ""), "{{worker}} {{outcome}}"
                )
            ],
            description="processed, duplicate (an event id already done: at-least-once redelivery), dead_letter.",
            unit="reqps",
            width=12,
        ),
        Panel(
            f"Consumer lag (alert above {pipe.max_lag_messages})",
            "timeseries",
            [Target("sum by (worker) (ragmon_worker_consumer_lag_messages)", "{{worker}}")],
            thresholds=bad_above(pipe.max_lag_messages),
            decimals=0,
            width=12,
        ),
        Panel(
            "Dead letters by reason",
            "timeseries",
            [
                Target(
                    zero_when_absent(
                        per_second("ragmon_worker_dead_letters_total", "worker, reason", "", fn="increase"),
                        "reason",
                    ),
                    "{{worker}} {{reason}}",
                )
            ],
            description="Records that could not be decoded or validated, sent to the DLQ topic with their reason.",
            thresholds=bad_above(1),
            decimals=0,
            width=8,
        ),
        Panel(
            "Workers ready",
            "stat",
            [Target("min by (worker) (ragmon_worker_ready)", "{{worker}}")],
            description="0: not consuming (a model that did not load, an outage being retried, or halted).",
            thresholds=bad_below(1),
            mappings=(("0", "not ready", "red"), ("1", "ready", "green")),
            width=8,
        ),
        Panel(
            "Workers halted",
            "stat",
            [
                Target(
                    zero_when_absent("max by (worker, reason) (ragmon_worker_halted)", "worker"),
                    "{{worker}} {{reason}}",
                )
            ],
            description="The dead-letter ratio limit stopped a worker rather than drain its topic into the DLQ.",
            thresholds=bad_above(1),
            mappings=(("0", "running", "green"), ("1", "halted", "red")),
            width=8,
        ),
    ]


def _worker_timing() -> list[Panel]:
    return [
        Panel(
            "Event delay p95 (API receipt to commit)",
            "timeseries",
            [
                Target(
                    quantile(0.95, "ragmon_worker_ingest_to_commit_duration_seconds", "worker"), "{{worker}}"
                )
            ],
            unit="s",
            width=8,
        ),
        Panel(
            "Batch duration p95",
            "timeseries",
            [Target(quantile(0.95, "ragmon_worker_batch_duration_seconds", "worker"), "{{worker}}")],
            unit="s",
            width=8,
        ),
        Panel(
            "Retries on outages",
            "timeseries",
            [
                Target(
                    zero_when_absent(per_second("ragmon_worker_retries_total", "worker, error", ""), "error"),
                    "{{worker}} {{error}}",
                )
            ],
            description="Batches that failed on Redis, Kafka or a model timeout and were retried (never dead-lettered).",
            unit="reqps",
            width=8,
        ),
    ]


def _scorer() -> list[Panel]:
    return [
        Panel(
            "Faithfulness scorer up",
            "stat",
            [Target("min(ragmon_faithfulness_scorer_up)", "HHEM")],
            thresholds=bad_below(1),
            mappings=UP_DOWN,
            width=6,
        ),
        Panel(
            "HHEM forward pass p95",
            "timeseries",
            [Target(quantile(0.95, "ragmon_faithfulness_inference_duration_seconds", ""), "p95")],
            unit="s",
            width=6,
        ),
        Panel(
            "Padding overhead of forward passes",
            "timeseries",
            [
                Target(
                    f"{per_second('ragmon_faithfulness_padded_tokens_total', '')} / "
                    f"({per_second('ragmon_faithfulness_scored_tokens_total', '', TV)} > 0)",
                    "padded / scored tokens",
                )
            ],
            description="Tokens computed, padding included, per prompt token scored: above ~2 long and short "
            "premises share batches.",
            decimals=2,
            width=6,
        ),
        Panel(
            "Model load failures",
            "timeseries",
            [
                Target(
                    zero_when_absent(
                        per_second("ragmon_faithfulness_model_load_failures_total", "", fn="increase")
                    ),
                    "failures",
                )
            ],
            decimals=0,
            thresholds=bad_above(1),
            width=6,
        ),
        Panel(
            "Scored pairs by source",
            "timeseries",
            [Target(per_second("ragmon_faithfulness_pairs_total", "source", ""), "{{source}}")],
            description="`cache`: a premise/answer pair seen before, not run through the model again.",
            unit="reqps",
            stacked=True,
            width=12,
        ),
        Panel(
            "Scoring errors by stage",
            "timeseries",
            [
                Target(
                    zero_when_absent(per_second("ragmon_faithfulness_errors_total", "stage", TV), "stage"),
                    "{{stage}}",
                )
            ],
            unit="reqps",
            width=12,
        ),
    ]


def _otlp(limits: Limits) -> list[Panel]:
    """The OTLP path: assembler (spans -> trace events), span forwarder and Phoenix exporter. Their consumer
    lag is on the workers' lag panel (worker assembler, forwarder, phoenix)."""
    pipe = limits.guardrails.pipeline
    return [
        Panel(
            "Assembler spans by outcome",
            "timeseries",
            [Target(per_second("ragmon_assembler_spans_total", "outcome", ""), "{{outcome}}")],
            description=f"stored, duplicate (a redelivery), overflow (over a trace's cap), late (after the trace's "
            f"event: a ticket above {pipe.max_late_span_ratio:.0%} of spans), feedback, dead_letter.",
            unit="reqps",
            width=8,
        ),
        Panel(
            "OTLP traces: events produced and drops by reason",
            "timeseries",
            [
                Target(per_second("ragmon_assembler_traces_emitted_total", "", TENANT), "trace events"),
                Target(
                    zero_when_absent(
                        per_second("ragmon_assembler_traces_dropped_total", "reason", ""), "reason"
                    ),
                    "dropped {{reason}}",
                ),
            ],
            description=f"A ticket when one reason takes more than {pipe.max_dropped_trace_ratio:.0%} of the "
            "finished traces (docs/otlp.md lists the reasons).",
            unit="reqps",
            width=8,
        ),
        Panel(
            "Open traces and assembly delay p95",
            "timeseries",
            [
                Target("sum(ragmon_assembler_pending_traces)", "open traces"),
                Target(
                    quantile(0.95, "ragmon_assembler_assembly_delay_duration_seconds", ""), "delay p95 (s)"
                ),
            ],
            description="Traces waiting in Redis for their root span or quiet period; delay from the root span "
            "ending to the trace event being produced (about the quiet period when healthy).",
            decimals=1,
            width=8,
        ),
        Panel(
            "Span forwarder: spans and requests by outcome",
            "timeseries",
            [
                Target(per_second("ragmon_forwarder_spans_total", "outcome", ""), "spans {{outcome}}"),
                Target(per_second("ragmon_forwarder_requests_total", "outcome", ""), "requests {{outcome}}"),
            ],
            description="unavailable: retried with backoff (a ticket when every request fails for "
            f"{pipe.export_failing_for}); rejected: refused for good by the collector (a ticket).",
            unit="reqps",
            width=8,
        ),
        Panel(
            "Phoenix exporter: annotations by kind and outcome",
            "timeseries",
            [
                Target(
                    per_second("ragmon_phoenix_annotations_total", "kind, outcome", ""),
                    "{{kind}} {{outcome}}",
                )
            ],
            description="sent, rejected, trace_not_found (the trace never reached Phoenix), untraceable, "
            "document_not_found, waiting_full.",
            unit="reqps",
            width=8,
        ),
        Panel(
            "Phoenix exporter: requests, failed attempts, waiting scores",
            "timeseries",
            [
                Target(
                    per_second("ragmon_phoenix_requests_total", "endpoint, outcome", ""),
                    "{{endpoint}} {{outcome}}",
                ),
                Target(
                    zero_when_absent(
                        per_second("ragmon_phoenix_annotation_failures_total", "kind", ""), "kind"
                    ),
                    "retried {{kind}}",
                ),
                Target("sum(ragmon_phoenix_waiting_events)", "waiting scores"),
            ],
            description="Failed attempts are annotations of a write that failed on a Phoenix outage and was "
            "retried; waiting scores wait in Redis for their trace to reach Phoenix.",
            decimals=1,
            width=8,
        ),
        Panel(
            "Evaluation exporter: records and requests by outcome",
            "timeseries",
            [
                Target(per_second("ragmon_evaluations_records_total", "outcome", ""), "records {{outcome}}"),
                Target(
                    per_second("ragmon_evaluations_requests_total", "outcome", ""), "requests {{outcome}}"
                ),
            ],
            description="gen_ai.evaluation.result log records (docs/otlp.md, Evaluations out). unavailable: "
            f"retried with backoff (a ticket when every request fails for {pipe.export_failing_for}); "
            "rejected: refused for good by the collector (a ticket).",
            unit="reqps",
            width=8,
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
