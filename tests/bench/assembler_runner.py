"""One assembler process, timed by stage (started by tests/bench/bench_otlp.py).

It builds the assembler as `python -m workers.assembler` does and runs its real loop
(the shared runtime's step, or AssemblerLoop.step in a tree from before the assembler ran on
it: poll, decode, store in Redis, commit, claim, load, assemble and
produce, wait for acks, close the state) on spans records already in Kafka, until
`--count` trace events are acknowledged, and prints one JSON line: seconds per stage
(wall clock and the main thread's CPU time), end to end (wall, the main thread's CPU, and
the process's CPU: every thread, the Kafka clients' background threads included), spans
stored, trace events emitted, and its peak RSS. The stages are timed by wrapping the assembler's own
objects by name, so the same file measures any tree whose assembler has these parts:
the reference (the code before a change) runs it with PYTHONPATH set to that tree.

    python tests/bench/assembler_runner.py --count 5000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

# stage -> (object path, method names tried in order); a method absent in a tree is simply not timed there
STAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "decode": ("assembler", ("decode",)),
    "store": ("store", ("add_many",)),
    "commit": ("consumer", ("commit",)),
    "claim": ("store", ("claim_due",)),
    "load": ("store", ("load_many",)),
    "assemble": ("assembler", ("_emit_trace", "_emit_traces")),
    "ack": ("emitter", ("wait",)),
    "finish": ("store", ("finish_many",)),
}
ALL = ("fetch", *STAGES, "end_to_end", "end_to_end_process")
BLOCK_HIREDIS = "RAGMON_BENCH_BLOCK_HIREDIS"


class StageClock:
    def __init__(self) -> None:
        self.wall = dict.fromkeys(ALL, 0.0)
        self.cpu = dict.fromkeys(ALL, 0.0)

    def wrap(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        wall, cpu = self.wall, self.cpu

        def timed(*args: Any, **kwargs: Any) -> Any:
            w, c = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                wall[stage] += time.perf_counter() - w
                cpu[stage] += time.thread_time() - c

        return timed


def run(count: int, timeout_s: float) -> dict[str, Any]:
    if (
        os.environ.get(BLOCK_HIREDIS) == "1"
    ):  # a reference revision that did not depend on hiredis runs without it
        sys.modules["hiredis"] = None  # type: ignore[assignment]  # redis-py then falls back to its Python parser
    import redis
    from prometheus_client import CollectorRegistry

    from service.contracts.config import load_section
    from service.contracts.process import tune_gc
    from workers.assembler import __main__ as main_module
    from workers.assembler.assembler import Assembler
    from workers.assembler.config import AssemblerConfig
    from workers.assembler.metrics import AssemblerMetrics
    from workers.runtime.emitter import KafkaEmitter
    from workers.runtime.metrics import RuntimeMetrics
    from workers.runtime.settings import WorkerSettings

    settings = WorkerSettings()
    config = load_section("assembler", AssemblerConfig)
    registry = CollectorRegistry()
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5)
    emitter = KafkaEmitter(
        settings,
        client_id="bench-assembler",
        linger_ms=main_module.EMIT_LINGER_MS,
        batch_size=main_module.EMIT_BATCH_BYTES,
    )
    runtime_metrics = RuntimeMetrics(registry, "assembler")
    assembler = Assembler(
        config,
        main_module.build_store(client, config),
        emitter,
        settings.topics,
        AssemblerMetrics(registry),
        runtime_metrics,
    )
    try:  # the assembler on the shared runtime
        from workers.assembler.processor import AssemblerProcessor
        from workers.runtime.consumer import ConsumerRuntime

        runtime = ConsumerRuntime(
            AssemblerProcessor(assembler, settings.topics.spans), settings, runtime_metrics, emitter, client
        )
        consumer, step = runtime.consumer, runtime._step
    except ImportError:  # a reference tree whose assembler had its own loop
        from workers.assembler.runner import AssemblerLoop  # type: ignore[import-not-found]

        loop = AssemblerLoop(assembler, settings, runtime_metrics)
        consumer, step = loop.consumer, loop.step
    clock = StageClock()
    holders = {
        "assembler": assembler,
        "store": assembler.store,
        "consumer": consumer,
        "emitter": emitter,
    }
    for stage, (holder, names) in STAGES.items():
        for name in names:
            if hasattr(holders[holder], name):
                setattr(holders[holder], name, clock.wrap(stage, getattr(holders[holder], name)))
                break
    poll = consumer.poll
    first: list[
        tuple[float, float, float]
    ] = []  # clocks when the first records were fetched (the group joined)

    def fetch(*args: Any, **kwargs: Any) -> Any:
        w, c, p = time.perf_counter(), time.thread_time(), time.process_time()
        polled = poll(*args, **kwargs)
        if polled:
            if not first:
                first.append((w, c, p))
            clock.wall["fetch"] += time.perf_counter() - w
            clock.cpu["fetch"] += time.thread_time() - c
        return polled

    consumer.poll = fetch

    def emitted() -> float:
        return sum(
            s.value
            for m in registry.collect()
            if m.name == "ragmon_assembler_traces_emitted"
            for s in m.samples
            if s.name.endswith("_total")
        )

    tune_gc()  # as main() does once start-up is over
    deadline = time.monotonic() + timeout_s
    try:
        while emitted() < count and time.monotonic() < deadline:
            step()
        # end to end: from the first records fetched (joining the group is start-up) to the last trace acknowledged
        if first:
            clock.wall["end_to_end"] = time.perf_counter() - first[0][0]
            clock.cpu["end_to_end"] = time.thread_time() - first[0][1]
            clock.cpu["end_to_end_process"] = time.process_time() - first[0][2]
    finally:
        consumer.close(autocommit=False)
        emitter.close()
        client.close()
    return {
        "traces": emitted(),
        "spans": registry.get_sample_value("ragmon_assembler_spans_total", {"outcome": "stored"}) or 0.0,
        "wall": clock.wall,
        "cpu": clock.cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "hiredis": bool(redis.utils.HIREDIS_AVAILABLE),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, required=True, help="trace events to wait for")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    print(json.dumps(run(args.count, args.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
