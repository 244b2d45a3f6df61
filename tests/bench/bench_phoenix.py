"""Phoenix exporter and span forwarder against a real Phoenix, with references from the same run.

- forwarder: spans/s acknowledged by Phoenix's OTLP/HTTP receiver, batched as
  the worker batches them; reference: the same records posted one request
  per trace (what an app exporting per trace does).
- exporter: score events/s written as annotations with `sync=true` (Phoenix
  stored them when it answers: what lets the worker commit); reference: the
  same annotations posted with `sync=false` (Phoenix's in-memory queue, which
  a crash loses) and timed until Phoenix shows them.

    PYTHONPATH=. .venv/bin/python -m tests.bench.bench_phoenix [--traces 500] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from service.local.embedded import start_redis
from tests.bench.common import REPORTS, machine_line, median
from tests.support.phoenix import PhoenixServer, ensure_venv
from tests.workers.phoenix.phoenix_data import (
    OtlpTrace,
    exclusion_result,
    faithfulness_score,
    rag_trace,
    root_span,
    score_event,
    spans_event,
    wait_for,
)
from workers.forwarder.metrics import ForwarderMetrics
from workers.forwarder.processor import SpanForwarder
from workers.forwarder.settings import ForwarderSettings
from workers.phoenix.annotations import Plan, TraceSpans, plan_exclusion, plan_faithfulness
from workers.phoenix.gateway import PhoenixGateway
from workers.phoenix.metrics import PhoenixMetrics
from workers.phoenix.processor import PhoenixExporter
from workers.phoenix.settings import PhoenixSettings
from workers.phoenix.waiting import WaitingRoom


def forward(px: PhoenixServer, traces: list[OtlpTrace], batched: bool) -> float:
    settings = ForwarderSettings(
        endpoint=f"{px.base_url}/v1/traces", headers=SecretStr(f"Authorization=Bearer%20{px.api_key}")
    )
    fwd = SpanForwarder(settings, ForwarderMetrics(CollectorRegistry()), "bench.spans")
    events = [spans_event(t, offset=i) for i, t in enumerate(traces)]
    started = time.perf_counter()
    for chunk in [events] if batched else [[e] for e in events]:
        fwd.process(chunk)
    seconds = time.perf_counter() - started
    fwd.close()
    wait_for(lambda: root_span(px, traces[-1].trace_id), timeout_s=120)
    return 3 * len(traces) / seconds


def export_sync(px: PhoenixServer, exporter: PhoenixExporter, traces: list[OtlpTrace]) -> float:
    scores = [score_event(faithfulness_score(t.trace_id)) for t in traces]
    scores += [score_event(exclusion_result(t.trace_id, ["gold"])) for t in traces]
    started = time.perf_counter()
    for i in range(0, len(scores), 500):  # the runtime's default batch
        exporter.process(scores[i : i + 500])
    return len(scores) / (time.perf_counter() - started)


def export_async_reference(px: PhoenixServer, traces: list[OtlpTrace], retriever_of: dict[str, str]) -> float:
    plan = Plan()
    for t in traces:
        plan_faithfulness(faithfulness_score(t.trace_id), t.root, plan)
        plan_exclusion(
            exclusion_result(t.trace_id, ["gold"]),
            TraceSpans(t.root, {"gold": (retriever_of[t.trace_id], 1)}),
            plan,
        )
    started = time.perf_counter()
    for route, planned in (("span_annotations", plan.spans), ("document_annotations", plan.documents)):
        for i in range(0, len(planned), 500):
            httpx.post(
                f"{px.base_url}/v1/{route}",
                headers=px.headers,
                timeout=120,
                json={"data": [p.payload for p in planned[i : i + 500]]},
            ).raise_for_status()
    last = traces[-1].root

    def stored() -> bool:
        answer = httpx.get(
            f"{px.base_url}/v1/projects/default/span_annotations",
            headers=px.headers,
            params={"span_ids": [last]},
            timeout=30,
        )
        return len(answer.json()["data"]) >= 3

    wait_for(stored, timeout_s=120, every_s=0.05)
    return 2 * len(traces) / (time.perf_counter() - started)


def request_split(registry: CollectorRegistry) -> list[str]:
    """Rows: per endpoint, requests, items written (the exporter's own annotation counter), seconds."""

    def sent(*kinds: str) -> float:
        return sum(
            registry.get_sample_value("ragmon_phoenix_annotations_total", {"kind": k, "outcome": "sent"}) or 0
            for k in kinds
        )

    items = {
        "get_spans": None,
        "span_annotations": sent("faithfulness", "faithfulness_sentence", "false_exclusion"),
        "document_annotations": sent("excluded_document"),
    }
    rows = []
    for endpoint, n in items.items():
        count = (
            registry.get_sample_value("ragmon_phoenix_request_duration_seconds_count", {"endpoint": endpoint})
            or 0
        )
        seconds = (
            registry.get_sample_value("ragmon_phoenix_request_duration_seconds_sum", {"endpoint": endpoint})
            or 0
        )
        per = f"{1000 * seconds / n:.1f}" if n else "—"
        rows.append(
            f"| `{endpoint}` | {count:.0f} | {f'{n:,.0f}' if n is not None else '—'} | {seconds:.1f} | {per} |"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPORTS / "phoenix.md")
    args = ap.parse_args()
    command = ensure_venv()
    rates: dict[str, list[float]] = {"batched": [], "per_trace": [], "sync": [], "async": []}
    with tempfile.TemporaryDirectory() as work:
        px = PhoenixServer(log_dir=Path(work), working_dir=Path(work))
        redis_server = start_redis()
        px.start(command)
        try:
            import redis

            settings = PhoenixSettings(url=px.base_url, api_key=SecretStr(px.api_key))
            registry = CollectorRegistry()
            metrics = PhoenixMetrics(registry)
            waiting = WaitingRoom(redis.Redis(port=redis_server.port), "bench", 10, 100_000)
            exporter = PhoenixExporter(settings, PhoenixGateway(settings, metrics), waiting, metrics)
            for _ in range(args.repeats):
                rates["per_trace"].append(
                    forward(px, [rag_trace(["d", "gold"]) for _ in range(args.traces)], False)
                )
                traces = [rag_trace(["d", "gold"]) for _ in range(args.traces)]
                rates["batched"].append(forward(px, traces, True))
                rates["sync"].append(export_sync(px, exporter, traces))
                traces = [rag_trace(["d", "gold"]) for _ in range(args.traces)]
                forward(px, traces, True)
                retriever_of = {t.trace_id: t.retriever for t in traces}
                rates["async"].append(export_async_reference(px, traces, retriever_of))
            exporter.close()
        finally:
            px.stop()
            redis_server.stop()
    m = {k: median(v) for k, v in rates.items()}
    split = request_split(registry)
    report = "\n".join(
        [
            "# Phoenix exporter and span forwarder",
            "",
            machine_line(),
            f"Phoenix 20.26.1 (SQLite, auth on), {args.traces} traces of 3 spans per repetition, "
            f"median of {args.repeats}.",
            "",
            "| what | rate | reference (same run) | ratio |",
            "|---|---|---|---|",
            f"| forwarder, batched as the worker does | {m['batched']:,.0f} spans/s | one request per trace "
            f"{m['per_trace']:,.0f} spans/s | {m['batched'] / m['per_trace']:.1f}x |",
            f"| exporter, `sync=true` (stored before commit) | {m['sync']:,.0f} score events/s "
            f"(2 annotations each) | `sync=false`, until visible {m['async']:,.0f}/s | {m['sync'] / m['async']:.2f}x |",
            "",
            "Raw: " + ", ".join(f"{k} {[round(x) for x in v]}" for k, v in rates.items()),
            "",
            "### Where the exporter's time goes (`sync=true`)",
            "",
            "The exporter already writes one `span_annotations` and one `document_annotations` request per batch of",
            "score events (up to `RAGMON_PHOENIX_MAX_ANNOTATIONS_PER_REQUEST` = 500 annotations each), after one span",
            "lookup per 100 traces. Request time summed over the run (the exporter's",
            "`ragmon_phoenix_request_duration_seconds`):",
            "",
            "| Phoenix endpoint | requests | annotations written | seconds | ms per annotation |",
            "|---|---:|---:|---:|---:|",
            *split,
            "",
            "Phoenix's `sync=true` handler upserts the annotations of a request one `INSERT ... ON CONFLICT` statement at",
            "a time (phoenix/server/api/routers/v1/spans.py, `annotate_spans`), so the rate is Phoenix's per-row cost",
            "on its database (SQLite here), not the number of requests; `sync=false` goes through Phoenix's bulk",
            "inserter (many rows per transaction) but answers before anything is stored.",
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
