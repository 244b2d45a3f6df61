"""One worker process, end to end, timed by stage (started by tests/bench/e2e.py).

It runs the worker's real runtime loop (ConsumerRuntime._step: poll, decode,
dedupe, process, emit, mark done, commit) on records already in Kafka, until
`--count` records are committed, and prints one JSON line: seconds per stage
(wall clock and this process's CPU time), its peak RSS and the totals of the
worker's counters and histogram sums (e.g. the pairs a scorer ran). The stages are
timed by wrapping the runtime's own objects, so the same file measures any
tree whose runtime has these parts: the reference (the code before a change)
runs it with PYTHONPATH set to that tree.

    python tests/bench/e2e_runner.py --worker exclusion --count 4000

With RAGMON_BENCH_PROFILE=<path> the loop runs under cProfile (CPU time) and its stats are written to <path>.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import os
import resource
import time
from collections.abc import Callable
from typing import Any

STAGES = ("fetch", "decode", "dedupe", "process", "emit", "mark_done", "commit", "end_to_end")


class StageClock:
    def __init__(self) -> None:
        self.wall = dict.fromkeys(STAGES, 0.0)
        self.cpu = dict.fromkeys(STAGES, 0.0)
        self.records = 0
        self.first_record_at: float | None = None
        self.last_commit_at = 0.0

    def wrap(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        wall, cpu = self.wall, self.cpu

        def timed(*args: Any, **kwargs: Any) -> Any:
            w, c = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                wall[stage] += time.perf_counter() - w
                cpu[stage] += time.process_time() - c

        return timed


def instrument(runtime: Any, consumer_module: Any, clock: StageClock) -> None:
    """Wrap each stage of the runtime's loop; empty polls (waiting for the group) are not timed."""
    poll = runtime.consumer.poll

    def fetch(*args: Any, **kwargs: Any) -> Any:
        w, c = time.perf_counter(), time.process_time()
        polled = poll(*args, **kwargs)
        if polled:
            clock.wall["fetch"] += time.perf_counter() - w
            clock.cpu["fetch"] += time.process_time() - c
            if clock.first_record_at is None:
                clock.first_record_at = w
        return polled

    runtime.consumer.poll = fetch
    if hasattr(runtime, "decoder"):  # one decoder object per worker (views)
        runtime.decoder.decode = clock.wrap("decode", runtime.decoder.decode)
    else:  # the module-level decode of the full contract models
        consumer_module.decode_record = clock.wrap("decode", consumer_module.decode_record)
    runtime.dedupe.split_new = clock.wrap("dedupe", runtime.dedupe.split_new)
    runtime.dedupe.mark_done = clock.wrap("mark_done", runtime.dedupe.mark_done)
    runtime.processor.process = clock.wrap("process", runtime.processor.process)
    runtime.emitter.wait = clock.wrap("emit", runtime.emitter.wait)
    runtime.consumer.commit = clock.wrap("commit", runtime.consumer.commit)
    handle = clock.wrap("end_to_end", runtime.handle)

    def counted(polled: dict[Any, list[Any]]) -> bool:
        done: bool = handle(polled)
        if done:
            clock.records += sum(len(records) for records in polled.values())
            clock.last_commit_at = time.perf_counter()
        return done

    runtime.handle = counted


def run(worker: str, count: int, timeout_s: float) -> dict[str, Any]:
    import redis
    from prometheus_client import CollectorRegistry

    import workers.runtime.consumer as consumer_module
    from service.contracts.process import tune_gc
    from workers.runtime.app import WorkerContext
    from workers.runtime.emitter import KafkaEmitter
    from workers.runtime.metrics import RuntimeMetrics
    from workers.runtime.settings import WorkerSettings

    main_module = importlib.import_module(f"workers.{worker}.__main__")
    settings = WorkerSettings()
    registry = CollectorRegistry()
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5)
    emitter = KafkaEmitter(settings, client_id=f"bench-{worker}")
    metrics = RuntimeMetrics(registry, worker)
    spec = getattr(main_module, "WORKER", None)
    if spec is not None:  # the shared entry point (workers/runtime/app.py) reads the worker's config
        from workers.runtime.config import load_worker_config

        config = load_worker_config(spec.name, spec.config)
        shared = getattr(spec, "sections", ())  # a reference tree from before shared sections has none
        if shared:
            sections = {name: load_worker_config(name, model) for name, model in shared}
            context = WorkerContext(worker, settings, registry, emitter, client, metrics, config, sections)
        else:
            context = WorkerContext(worker, settings, registry, emitter, client, metrics, config)
        processor = spec.build(context)
    else:  # a reference tree from before it: build read its own config
        processor = main_module.build(WorkerContext(worker, settings, registry, emitter, client))  # type: ignore[call-arg]
    runtime = consumer_module.ConsumerRuntime(processor, settings, metrics, emitter, client)
    clock = StageClock()
    instrument(runtime, consumer_module, clock)
    tune_gc()  # as run_worker does once startup is over
    deadline = time.monotonic() + timeout_s
    profile_to = os.environ.get("RAGMON_BENCH_PROFILE")  # a path: cProfile stats of the loop written there
    profiler = cProfile.Profile(time.process_time) if profile_to else None  # CPU time, as the report counts
    try:
        if profiler is not None:
            profiler.enable()
        while clock.records < count and time.monotonic() < deadline:
            runtime._step()
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(profile_to))
        runtime.request_stop()
        runtime._shutdown()
        emitter.close()
    return {
        "records": clock.records,
        "wall": clock.wall,
        "cpu": clock.cpu,
        "span_s": clock.last_commit_at - (clock.first_record_at or clock.last_commit_at),
        "peak_rss_mb": peak_rss_mb(),
        "counters": counter_totals(registry),
    }


def counter_totals(registry: Any) -> dict[str, float]:
    """Each counter, and each histogram's sum, of the worker's registry summed over its labels
    (e.g. the pairs a scorer ran, the seconds of its forward passes)."""
    totals: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name.endswith(("_total", "_sum")):
                totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM, which starts afresh at exec (ru_maxrss keeps the peak of the forked
    parent, e.g. a benchmark holding large arrays, across the exec)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    print(json.dumps(run(args.worker, args.count, args.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
