"""Metrics of the assembler worker (its consumption metrics are the runtime's ragmon_worker_*)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.runtime.families import Families

_DELAY_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)


class AssemblerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        f = Families(registry)
        self.spans = f.counter(
            "ragmon_assembler_spans_total",
            "Spans consumed, by outcome (stored, duplicate, overflow, late, feedback); records that are not "
            "spans records are the runtime's dead letters (ragmon_worker_dead_letters_total, invalid_spans)",
            ["outcome"],
        )
        self.log_records = f.counter(
            "ragmon_assembler_log_records_total",
            "Log records (POST /v1/logs) consumed, by outcome: stored, duplicate, overflow, late (their trace "
            "was already assembled), joined (folded into their span), no_span (their span is not in the "
            "trace), unread (an event ragmon does not read), no_trace (their trace never came or was dropped)",
            ["outcome"],
        )
        self.traces_emitted = f.counter(
            "ragmon_assembler_traces_emitted_total", "Trace events produced from OTLP traces", ["tenant"]
        )
        self.traces_dropped = f.counter(
            "ragmon_assembler_traces_dropped_total",
            "OTLP traces not turned into a trace event, by reason",
            ["reason"],
        )
        self.feedback_emitted = f.counter(
            "ragmon_assembler_feedback_emitted_total",
            "Feedback events produced from span annotations",
            ["tenant"],
        )
        self.annotations_skipped = f.counter(
            "ragmon_assembler_annotations_skipped_total",
            "Span annotations that are not user feedback, by reason",
            ["reason"],
        )
        self.trace_spans = f.counter(
            "ragmon_assembler_trace_spans_total",
            "Spans of finished traces by kind: OpenInference's, onto which GenAI operations map (none: "
            "no convention, other: a kind outside the spec)",
            ["kind"],
        )
        self.unknown_attributes = f.counter(
            "ragmon_assembler_unknown_attributes_total",
            "Attributes of a convention ragmon reads (gen_ai.*) that it does not know, on spans of finished "
            "traces, by convention: ignored, never fatal",
            ["convention"],
        )
        self.pending = f.gauge(
            "ragmon_assembler_pending_traces", "Open traces waiting in Redis for their root or quiet period"
        )
        self.assembly_delay = f.histogram(
            "ragmon_assembler_assembly_delay_duration_seconds",
            "From a trace's root span ending to its event being produced",
            buckets=_DELAY_BUCKETS,
        )
