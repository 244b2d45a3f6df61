"""Exclusion processor memory over a long stream of distinct claims: does RSS level off, and where?

One ExclusionProcessor with a private redis-server processes batches of 500
simulated traces and labels (the `clean` scenario). A pool of records is
decoded once; each pass over it gives every event a fresh event id and trace
id, so every claim key is new, as in a live stream, while generating and
decoding cost nothing. Every 20,000 events it prints the process's RSS and how
many counted claims the processor remembers; run it past the 100,000-key bound
of that memory. To compare with an earlier revision, run the same file with
PYTHONPATH set to that revision's tree.

    python tests/bench/exclusion_memory.py --events 140000
"""

from __future__ import annotations

import argparse
import gc
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import redis
from prometheus_client import CollectorRegistry

from service.contracts.stored import stored_from_envelope
from service.local.embedded import start_redis
from service.simulate.scenario import load_scenario
from service.simulate.stream import generate_events
from tests.support.records import FakeRecord
from workers.exclusion.config import ExclusionConfig
from workers.exclusion.metrics import ExclusionMetrics
from workers.exclusion.processor import ExclusionProcessor
from workers.runtime.decode import RecordDecoder

POOL = 5000
BATCH = 500


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _remembered(processor: ExclusionProcessor) -> int:
    counted = processor._counted
    return len(getattr(counted, "_keys", counted))  # an OrderedDict of keys before the digest arrays


def _pool(decoder: RecordDecoder) -> list[tuple[Any, str]]:
    anchor, now = datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC).isoformat()
    pool = []
    for ev in generate_events(load_scenario("clean").with_overrides(duration_s=None), anchor):
        if ev.type in ("trace", "label"):
            value = orjson.dumps(stored_from_envelope(ev.envelope(anchor), ev.tenant, now))
            pool.append(
                (decoder.decode(FakeRecord(value, topic="traces", key=b"k"), ev.type), ev.body["trace_id"])
            )
            if len(pool) == POOL:
                return pool
    raise RuntimeError("scenario ended early")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=140_000)
    args = ap.parse_args()
    server = start_redis()
    try:
        config = ExclusionConfig(label_wait_ttl_s=60)
        processor = ExclusionProcessor(
            redis.Redis(port=server.port), ExclusionMetrics(CollectorRegistry(), config), config
        )
        pool = _pool(RecordDecoder(processor.views))
        done, started = 0, time.monotonic()
        print(f"before the stream: RSS {rss_mb():.1f} MiB", flush=True)
        while done < args.events:
            cycle = done // POOL
            for start in range(0, POOL, BATCH):
                batch = []
                for event, trace_id in pool[start : start + BATCH]:
                    event.stored.id = uuid.uuid4()
                    event.body.trace_id = f"{trace_id}~{cycle}"
                    batch.append(event)
                processor.process(batch)
                done += len(batch)
                if done % 20_000 == 0:
                    gc.collect()
                    print(
                        f"{done:,} events: RSS {rss_mb():.1f} MiB, claims remembered "
                        f"{_remembered(processor):,}, {time.monotonic() - started:.0f} s",
                        flush=True,
                    )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
