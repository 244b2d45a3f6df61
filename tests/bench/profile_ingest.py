"""Where the API's time goes under the ingest load: py-spy samples of `ragmon api --workers N`.

Starts a private broker and Redis, the API of this tree (or of `--reference REV`),
loads it as bench_ingest.py does, and records the API's processes with py-spy
(`--subprocesses`, native frames off, idle threads left out). Prints the share of
busy samples (threads waiting in epoll or on a lock left out) by stage of the
request, and writes the raw collapsed stacks next to the bench's work files.

py-spy is not a dependency: `pip install py-spy` into any environment and pass
`--py-spy PATH` (or have it on PATH).

    python tests/bench/profile_ingest.py [--reference REV] [--seconds 12] [--py-spy PATH] [--gil]
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
from tests.bench.bench_ingest import BATCH, KEY, api_env, start_api, trace_envelopes, wait_ready
from tests.bench.common import ROOT, build_request, run_load
from tests.bench.e2e import reference_tree

# A sample whose innermost frame is one of these is a thread waiting, not working: left out.
# `Runner.run` innermost is uvloop's loop in C, nearly always waiting in epoll for the next request.
IDLE = (
    "EpollSelector.select (",
    "Condition.wait (",
    "Queue.get (",
    "_worker (concurrent/futures/thread.py",
    "Runner.run (",
)

# Inside the request handler, the first of these found from the innermost frame outwards names the stage.
HANDLER_STAGES = [
    (
        "JSON of the batch (`parse_envelope`; plain form: `decode_plain`, envelopes included)",
        "parse_envelope (",
    ),
    (
        "JSON of the batch (`parse_envelope`; plain form: `decode_plain`, envelopes included)",
        "decode_plain (",
    ),
    ("body check (msgspec `check_body`, pydantic only for refusals)", "check_body ("),
    ("body check (plain form: msgspec decode of the body's bytes, then identifiers)", "_decode_body ("),
    ("body check (plain form: msgspec decode of the body's bytes, then identifiers)", "body_ids ("),
    ("body check (plain form: msgspec decode of the body's bytes, then identifiers)", "rules_hold ("),
    ("envelope (pydantic `EventEnvelope` / `plain_envelope`)", "EventEnvelope"),
    ("envelope (pydantic `EventEnvelope` / `plain_envelope`)", "plain_envelope ("),
    ("envelope (pydantic `EventEnvelope` / `plain_envelope`)", "BaseModel.model_validate ("),
    ("redaction (`redact_body`)", "redact_body ("),
    ("redaction (`redact_body`)", "redacted_bytes ("),
    ("rest of prepare (time window, record JSON, key, headers)", "BatchPreparer.prepare ("),
    ("rest of prepare (time window, record JSON, key, headers)", "BatchPreparer.prepare_plain ("),
    ("producer on the event loop (records into kafka-python's accumulator)", "EventProducer.produce ("),
    ("rest of the handler (auth, body read, rate limit, metrics, response)", "ingest_events ("),
]
THREADS = [
    ("kafka-python sender thread (batches, lz4, socket, acks)", "Sender.run ("),
    ("thread-pool hand-offs (anyio worker threads)", "WorkerThread.run ("),
]
OTHER = "HTTP, framework and event loop outside the handler"


def classify(frames: list[str]) -> str | None:
    if any(frames[-1].startswith(idle) for idle in IDLE):
        return None
    for label, needle in THREADS:
        if any(f.startswith(needle) for f in frames):
            return label
    if not any(f.startswith("ingest_events (") for f in frames):
        return OTHER
    for frame in reversed(frames):
        for label, needle in HANDLER_STAGES:
            if needle in frame:
                return label
    return OTHER


def summarise(raw: str) -> tuple[int, int, dict[str, float]]:
    """(samples, busy samples, share of busy samples by stage)."""
    total = busy = 0
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        label = classify(stack.split(";"))
        if label is not None:
            busy += int(n)
            counts[label] += int(n)
    order = list(
        dict.fromkeys([label for label, _ in HANDLER_STAGES] + [label for label, _ in THREADS] + [OTHER])
    )
    return total, busy, {label: counts[label] / busy if busy else float("nan") for label in order}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", default=None, help="profile the API of this git revision instead")
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--api-workers", type=int, default=2)
    ap.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    ap.add_argument(
        "--gil",
        action="store_true",
        help="sample only the thread holding the GIL: Python's own CPU time, without threads waiting "
        "for the GIL (which py-spy otherwise counts as busy)",
    )
    args = ap.parse_args()
    tree = reference_tree(args.reference) if args.reference else ROOT
    name = f"profile-{args.reference or 'change'}{'-gil' if args.gil else ''}"
    envelopes = trace_envelopes(5000)
    bodies = [orjson.dumps({"events": envelopes[i : i + BATCH]}) for i in range(0, len(envelopes), BATCH)]
    broker, redis = start_broker(), start_redis()
    env = api_env(f"127.0.0.1:{broker.port}", redis.port)
    out = ROOT / "tests" / "bench" / ".work" / f"{name}.txt"
    api = None
    try:
        api, port = start_api(tree, env, args.api_workers, name)
        wait_ready(api, port)
        headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        requests = [build_request("127.0.0.1", port, "/v1/events", b, headers) for b in bodies]
        spy: list[subprocess.CompletedProcess[bytes]] = []

        def record() -> None:
            spy.append(
                subprocess.run(
                    [
                        args.py_spy,
                        "record",
                        "--pid",
                        str(api.pid),
                        "--subprocesses",
                        "--format",
                        "raw",
                        "-d",
                        str(args.seconds),
                        "-r",
                        "200",
                        "-o",
                        str(out),
                    ]
                    + (["--gil"] if args.gil else []),
                    capture_output=True,
                    check=False,
                )
            )

        recorder = threading.Timer(3.0, record)  # after the load's warm-up
        recorder.start()
        load = run_load(
            "127.0.0.1", port, requests, BATCH, args.clients, warmup_s=3, measure_s=args.seconds + 2
        )
        recorder.join()
    finally:
        if api is not None:
            api.terminate()
            api.wait(15)
        redis.stop()
        broker.stop()
    if not spy or spy[0].returncode != 0 or not out.exists():
        raise SystemExit(f"py-spy failed: {spy[0].stderr.decode()[-2000:] if spy else 'not run'}")
    total, busy, shares = summarise(Path(out).read_text())
    print(
        f"{name}: {load.events_per_s:,.0f} events/s under the profiler, statuses {load.statuses}, "
        f"{total} samples, {busy} busy (raw stacks in {out})"
    )
    for label, share in shares.items():
        print(f"| {label} | {share:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
