"""Metrics of the assembler worker (its consumption metrics are the runtime's ragmon_worker_*)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_DELAY_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)


class AssemblerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.spans = Counter(
            "ragmon_assembler_spans_total",
            "Spans consumed, by outcome (stored, duplicate, overflow, late, feedback); records that are not "
            "spans records are the runtime's dead letters (ragmon_worker_dead_letters_total, invalid_spans)",
            ["outcome"],
            registry=registry,
        )
        self.log_records = Counter(
            "ragmon_assembler_log_records_total",
            "Log records (POST /v1/logs) consumed, by outcome: stored, duplicate, overflow, late (their trace "
            "was already assembled), joined (folded into their span), no_span (their span is not in the "
            "trace), unread (an event ragmon does not read), no_trace (their trace never came or was dropped)",
            ["outcome"],
            registry=registry,
        )
        self.traces_emitted = Counter(
            "ragmon_assembler_traces_emitted_total",
            "Trace events produced from OTLP traces",
            ["tenant"],
            registry=registry,
        )
        self.traces_dropped = Counter(
            "ragmon_assembler_traces_dropped_total",
            "OTLP traces not turned into a trace event, by reason",
            ["reason"],
            registry=registry,
        )
        self.feedback_emitted = Counter(
            "ragmon_assembler_feedback_emitted_total",
            "Feedback events produced from span annotations",
            ["tenant"],
            registry=registry,
        )
        self.annotations_skipped = Counter(
            "ragmon_assembler_annotations_skipped_total",
            "Span annotations that are not user feedback, by reason",
            ["reason"],
            registry=registry,
        )
        self.trace_spans = Counter(
            "ragmon_assembler_trace_spans_total",
            "Spans of finished traces by kind: OpenInference's, onto which GenAI operations map (none: "
            "no convention, other: a kind outside the spec)",
            ["kind"],
            registry=registry,
        )
        self.unknown_attributes = Counter(
            "ragmon_assembler_unknown_attributes_total",
            "Attributes of a convention ragmon reads (gen_ai.*) that it does not know, on spans of finished "
            "traces, by convention: ignored, never fatal",
            ["convention"],
            registry=registry,
        )
        self.pending = Gauge(
            "ragmon_assembler_pending_traces",
            "Open traces waiting in Redis for their root or quiet period",
            registry=registry,
        )
        self.assembly_delay = Histogram(
            "ragmon_assembler_assembly_delay_duration_seconds",
            "From a trace's root span ending to its event being produced",
            buckets=_DELAY_BUCKETS,
            registry=registry,
        )
