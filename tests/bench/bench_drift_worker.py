"""Drift worker throughput on the app's own embeddings, end to end: traces per second of one process.

One worker process runs its real runtime loop on stored trace records that
carry a 384-dim query embedding (the app's own, `query.embedding`; the pinned
encoder is off) in a private Tansu broker, from the record bytes to the
commit: decode, dedupe keys, the windows in Redis, the scheduled MMD tests,
commit (tests/bench/e2e.py). The reference is the same runner on another git
revision, taking turns within each repeat.

    python tests/bench/bench_drift_worker.py --reference dd97703 --out tests/bench/reports/drift_worker.md

`--sessions`: every trace is a query of a session (three queries a minute apart, each follow-up's embedding
close to the one before on one query in two), so the session state (docs/reformulations.md: the swap of
each session's last query in Redis, the comparison, the reformulation marks and the signals it publishes)
is in the measured path; `--reference bd9bbbc^` is the worker before sessions existed.

    python tests/bench/bench_drift_worker.py --sessions --reference bd9bbbc^ --out tests/bench/reports/drift_sessions.md
"""

from __future__ import annotations

import argparse
import os
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import orjson

from service.contracts import record_key
from service.contracts.stored import stored_document
from tests.bench import e2e
from tests.bench.common import write_report

TARGET_PER_S = 5_000
DIM = 384
CONFIG = {
    "drift": {
        "encoder": {"enabled": False},
        "app_embeddings": {"models": ["emb"]},
        "reference_size": 1000,
        "current_size": 1000,
    }
}


SESSION_QUERIES = 3


def stored_records(n: int, sessions: bool = False) -> list[tuple[str, bytes | None, bytes]]:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    if sessions:  # one follow-up in two asks the same thing again: its embedding is near the one before
        for i in range(1, n):
            if i % SESSION_QUERIES and i % 2:
                vectors[i] = vectors[i - 1] + 0.1 * vectors[i]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    start = datetime.now(UTC)
    now = start.isoformat()
    out: list[tuple[str, bytes | None, bytes]] = []
    for i, vector in enumerate(vectors):
        body: dict[str, object] = {
            "trace_id": f"t-{i}",
            "request_id": f"r-{i}",
            "intent": "billing",
            "query": {
                "text": f"question {i}",
                "embedding": [round(float(x), 6) for x in vector],
                "embedding_model": "emb",
            },
            "answer": {"text": "an answer"},
        }
        at = now
        if sessions:
            body["session_id"] = f"s-{i // SESSION_QUERIES}"
            at = (start + timedelta(seconds=60 * (i % SESSION_QUERIES))).isoformat()
        value = orjson.dumps(stored_document(str(uuid.uuid4()), "trace", "acme", at, now, body))
        out.append(("trace", record_key("trace", "acme", body), value))
    return out


def report(results: dict[str, dict[str, float]], args: argparse.Namespace, load: tuple[float, float]) -> str:
    change = results["change"]
    verdict = "meets" if change["e2e_cpu"] >= TARGET_PER_S else "MISSES"
    flag, sessions = (
        (
            " --sessions",
            f" (every trace a query of a session, {SESSION_QUERIES} a minute apart, one follow-up in"
            " two a reformulation, so the session state is measured; the reference is the worker before sessions)",
        )
        if args.sessions
        else ("", "")
    )
    return f"""`python tests/bench/bench_drift_worker.py --reference {args.reference}{flag}`{sessions} — {args.events:,} trace records,
each with a {DIM}-dim app embedding (encoder off), in a private Tansu broker; one worker process runs its real
runtime loop (batches of up to 500; windows of 1,000 in Redis, the scheduled MMD tests in its ticks) until every
record is committed. Median of {args.repeats} repeats; the change and the reference (`{args.reference}`) take turns
within each repeat. 1-minute load average {load[0]:.1f} before, {load[1]:.1f} after (a shared 2-core machine:
the CPU-second columns are what one process sustains on a core of its own).

## End to end: record bytes -> commit, decode and Redis included, one process

{e2e.headline_table(results, "traces")}

Target ≥ {TARGET_PER_S:,} traces/s per process, end to end, on a core of its own (per CPU-second):
**{verdict}** ({change["e2e_cpu"] / TARGET_PER_S:.1f}× the target; {change["e2e"] / TARGET_PER_S:.1f}× on the wall
clock of this loaded machine). {e2e.ratio_line(results)}

## Where the time goes (µs per trace, median over repeats)

{e2e.profile_table(results, "trace")}

The reference validated all {DIM} numbers of every embedding one by one as pydantic floats, and every other field
of the trace; the change decodes each record once, with msgspec, into the drift worker's view
(workers/drift/views.py: the query, variant and intent).
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--reference", default=None, help="git revision measured as the reference")
    ap.add_argument("--sessions", action="store_true", help="every trace a query of a session")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    runs = e2e.measure(
        e2e.Workload("drift", stored_records(args.events, args.sessions), CONFIG),
        args.repeats,
        args.reference,
    )
    results = {path: e2e.summary(path_runs) for path, path_runs in runs.items()}
    write_report(
        "drift_sessions" if args.sessions else "drift_worker",
        "Drift worker benchmark (app embeddings" + (", every trace in a session)" if args.sessions else ")"),
        report(results, args, (load_before, os.getloadavg()[0])),
        args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
