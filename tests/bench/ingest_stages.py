"""The ingest pipeline's CPU cost per event by stage, in this process (run by bench_ingest.py per tree).

Stages of POST /v1/events before the producer: parse (JSON of the batch),
prepare (envelope and body validation, time window, redaction, the stored
record's JSON), and within prepare the body validation alone (prepare again
with the body check made free: the difference); on a tree with the plain-form
path (decode_plain, prepare_plain), that path whole ("plain": what a batch in
the plain form costs, parse included). Runs on any tree whose
service.api.ingest has parse_envelope and BatchPreparer (PYTHONPATH = tree).
Prints one JSON line: µs of CPU per event.

    python tests/bench/ingest_stages.py BATCHES.json
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson


def cpu_per_event(
    run: Callable[[], object], events: int, repeats: int = 5, setup: Callable[[], None] | None = None
) -> float:
    """CPU µs per event of `run`, best of `repeats`; `setup` runs before each, outside the timing."""
    if setup is not None:
        setup()
    run()
    best = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        started = time.process_time()
        run()
        best.append(time.process_time() - started)
    return min(best) / events * 1e6


def main() -> int:
    import importlib

    import service.api.ingest as ingest
    from service.api.redaction import Redactor
    from service.contracts import Topics
    from service.contracts.process import tune_gc

    # A tree before ingest.py's split (parse_envelope in ingest) and the vocabulary (limits.py).
    try:
        ingest_body: Any = importlib.import_module("service.api.ingest_body")
    except ImportError:
        ingest_body = ingest
    try:
        limits: Any = importlib.import_module("service.contracts.vocabulary")
    except ImportError:
        limits = importlib.import_module("service.contracts.limits")
    MAX_CLOCK_SKEW_S, MAX_EVENT_AGE_S = limits.MAX_CLOCK_SKEW_S, limits.MAX_EVENT_AGE_S  # noqa: N806

    with open(sys.argv[1]) as f:
        bodies = [b.encode() for b in json.load(f)]
    events = sum(len(orjson.loads(b)["events"]) for b in bodies)
    preparer = ingest.BatchPreparer(Topics("bench"), Redactor(), MAX_EVENT_AGE_S, MAX_CLOCK_SKEW_S)
    parsed = [ingest_body.parse_envelope(b, 1000) for b in bodies]
    tune_gc()

    # prepare changes the events it is given (redaction, tenant fields): each run gets fresh
    # copies, made before the clock starts.
    fresh: list[list[Any]] = []

    def copies() -> None:
        fresh[:] = [copy.deepcopy(batch) for batch in parsed]

    def prepare() -> None:
        for batch in fresh:
            preparer.prepare(batch, "bench", None)

    out: dict[str, Any] = {
        "parse": cpu_per_event(lambda: [ingest_body.parse_envelope(b, 1000) for b in bodies], events),
        "prepare": cpu_per_event(prepare, events, setup=copies),
    }

    if hasattr(preparer, "decode_plain"):  # the path a batch in the plain form takes (not on the reference)

        def plain() -> None:
            for b in bodies:
                batch = preparer.prepare_plain(preparer.decode_plain(b), "bench", None)
                assert batch is not None and len(batch.records) == len(batch.results), (
                    "the plain path declined"
                )

        out["plain"] = cpu_per_event(plain, events)

    class _Free:
        @staticmethod
        def model_validate(body: Any) -> Any:
            return body

    free: Any = dict.fromkeys(ingest.BODY_MODELS, _Free)
    ingest.BODY_MODELS = free
    if hasattr(ingest, "check_body"):
        setattr(ingest, "check_body", lambda _type, _body: True)  # noqa: B010 - the reference tree has none
    out["prepare_without_body_check"] = cpu_per_event(prepare, events, setup=copies)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
