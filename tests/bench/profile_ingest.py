"""Where the API's time goes under the ingest load: py-spy samples of `ragmon api --workers N`.

Starts a private broker and Redis, the API of this tree (or of `--reference REV`),
loads it as bench_ingest.py does, and records the API's processes with py-spy
(`--subprocesses`, native frames off, idle threads left out). Prints the share of
samples whose stack contains each of the named functions, and writes the raw
collapsed stacks next to the bench's work files for a closer look.

py-spy is not a dependency: `pip install py-spy` into any environment and pass
`--py-spy PATH` (or have it on PATH).

    python tests/bench/profile_ingest.py [--reference REV] [--seconds 12] [--py-spy PATH]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import threading
from collections import Counter
from pathlib import Path

import orjson

from service.local.embedded import start_broker, start_redis
from tests.bench.bench_ingest import BATCH, KEY, start_api, trace_envelopes, wait_ready
from tests.bench.common import ROOT, build_request, run_load
from tests.bench.e2e import reference_tree

# (label, substring of a py-spy frame "function (path:line)")
STAGES = [
    ("whole request handler (`ingest_events`)", "ingest_events (service/api/routes_events.py"),
    ("read the body (`_read_body`)", "_read_body (service/api/routes_events.py"),
    ("JSON of the batch (`parse_envelope`)", "parse_envelope ("),
    ("prepare: validate, redact, record JSON (`BatchPreparer.prepare`)", "prepare (service/api/ingest.py"),
    ("of which envelope validation (pydantic `EventEnvelope`)", "validate_python ("),
    ("of which body check (msgspec `check_body`)", "check_body ("),
    ("of which redaction (`redact_body`)", "redact_body ("),
    ("producer on the event loop (`EventProducer.produce`)", "produce (service/api/producer.py"),
    ("of which kafka-python `send` per record", "send (kafka/producer/kafka.py"),
    ("of which record batches built in the API", "build_batches ("),
    ("kafka-python sender thread (`Sender.run`)", "run (kafka/producer/sender.py"),
    ("uvicorn HTTP protocol (`data_received`, `send`)", "uvicorn/protocols/http/"),
    ("asyncio event loop (`_run_once`, outside the above)", "_run_once ("),
]


def summarise(raw: str) -> tuple[int, list[tuple[str, float]]]:
    total = 0
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        for label, needle in STAGES:
            if needle in stack:
                counts[label] += int(n)
    return total, [(label, counts[label] / total if total else float("nan")) for label, _ in STAGES]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", default=None, help="profile the API of this git revision instead")
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--api-workers", type=int, default=2)
    ap.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    args = ap.parse_args()
    tree = reference_tree(args.reference) if args.reference else ROOT
    name = f"profile-{args.reference or 'change'}"
    envelopes = trace_envelopes(5000)
    bodies = [orjson.dumps({"events": envelopes[i:i + BATCH]}) for i in range(0, len(envelopes), BATCH)]
    broker, redis = start_broker(), start_redis()
    env = {"RAGMON_KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{broker.port}",
           "RAGMON_REDIS_URL": f"redis://127.0.0.1:{redis.port}/0", "RAGMON_DEV_API_KEY": KEY,
           "RAGMON_DEV_TENANT": "bench", "RAGMON_RATE_LIMIT_EPS": "1000000", "RAGMON_RATE_LIMIT_BURST": "2000000"}
    out = ROOT / "tests" / "bench" / ".work" / f"{name}.txt"
    api = None
    try:
        api, port = start_api(tree, env, args.api_workers, name)
        wait_ready(api, port)
        headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        requests = [build_request("127.0.0.1", port, "/v1/events", b, headers) for b in bodies]
        spy: list[subprocess.CompletedProcess[bytes]] = []

        def record() -> None:
            spy.append(subprocess.run([args.py_spy, "record", "--pid", str(api.pid), "--subprocesses", "--format",
                                       "raw", "-d", str(args.seconds), "-r", "200", "-o", str(out)],
                                      capture_output=True, check=False))

        recorder = threading.Timer(3.0, record)  # after the load's warm-up
        recorder.start()
        load = run_load("127.0.0.1", port, requests, BATCH, args.clients, warmup_s=3, measure_s=args.seconds + 2)
        recorder.join()
    finally:
        if api is not None:
            api.terminate()
            api.wait(15)
        redis.stop()
        broker.stop()
    if not spy or spy[0].returncode != 0 or not out.exists():
        raise SystemExit(f"py-spy failed: {spy[0].stderr.decode()[-2000:] if spy else 'not run'}")
    total, shares = summarise(Path(out).read_text())
    print(f"{name}: {load.events_per_s:,.0f} events/s under the profiler, statuses {load.statuses}, "
          f"{total} samples (raw stacks in {out})")
    for label, share in shares:
        print(f"| {label} | {share:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
