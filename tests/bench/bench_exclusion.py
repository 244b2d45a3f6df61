"""Exclusion worker throughput: samples per second per process.

Each sample has 50 candidates, 3 relevance predicates (locale eq, product in,
updated_at gte a date) and 2 entitlement predicates (tenant eq, access_group
in). Measured in one run, medians of repeats:

- pure: plan (compile predicates, entitlement check, evaluate every
  candidate) + the query evaluation, no I/O;
- processor: ExclusionProcessor.process() on batches, against a private
  redis-server, metrics included (what one worker process sustains once the
  runtime has decoded the records);
- decode: TraceBody validation of the same bodies, the runtime's share;
- reference: a naive evaluator (op dispatch per candidate and predicate,
  dates parsed on every comparison) over the same samples.

    python tests/bench/bench_exclusion.py --out tests/bench/reports/exclusion.md
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from prometheus_client import CollectorRegistry

from service.contracts import StoredEvent, TraceBody, parse_instant
from service.embedded import start_redis
from workers.exclusion.config import ExclusionConfig
from workers.exclusion.evaluate import ProxyGold, evaluate
from workers.exclusion.metrics import ExclusionMetrics
from workers.exclusion.plan import plan_trace
from workers.exclusion.processor import ExclusionProcessor
from workers.runtime.types import Event, SourceRecord

TARGET_PER_S = 2_000
CANDIDATES = 50
LOCALES = ("en-US", "en-GB", "de-DE", "fr-FR", "pt-BR")
PRODUCTS = ("billing", "search", "auth", "storage", "mail", "chat")
GROUPS = ("public", "staff", "admin")


def sample_body(rng: random.Random, i: int) -> dict[str, Any]:
    start = date(2025, 1, 1)
    candidates = [
        {
            "id": f"doc-{rng.randrange(100_000)}-{k}",
            "score": round(rng.random(), 4),
            "metadata": {
                "tenant": "acme",
                "access_group": rng.choice(GROUPS[:2]),
                "locale": rng.choice(LOCALES),
                "product": rng.choice(PRODUCTS),
                "updated_at": (start + timedelta(days=rng.randrange(500))).isoformat() + "T00:00:00Z",
            },
        }
        for k in range(CANDIDATES)
    ]
    filters = {
        "entitlement": [
            {"field": "tenant", "op": "eq", "value": "acme"},
            {"field": "access_group", "op": "in", "value": ["public", "staff"]},
        ],
        "relevance": [
            {"field": "locale", "op": "eq", "value": rng.choice(LOCALES)},
            {"field": "product", "op": "in", "value": rng.sample(PRODUCTS, 2)},
            {"field": "updated_at", "op": "gte", "value": "2025-06-01"},
        ],
    }
    return {
        "trace_id": f"trace-{i}",
        "request_id": f"req-{i}",
        "intent": "billing",
        "query": {"text": "how do I change my card?"},
        "retrieval": {"filters": filters, "exclusion_sample": {"candidates": candidates}},
    }


def as_event(body: dict[str, Any], parsed: TraceBody, offset: int) -> Event:
    now = datetime.now(UTC)
    stored = StoredEvent.model_validate(
        {
            "id": uuid.uuid4(),
            "type": "trace",
            "tenant": "acme",
            "timestamp": now,
            "received_at": now,
            "body": body,
        }
    )
    return Event(SourceRecord("bench.traces", 0, offset, None, 0), stored, parsed)


def naive_false_exclusion(body: dict[str, Any], threshold: float, top_k: int) -> bool:
    """A direct reading of the definition, as one would first write it."""

    def ok(pred: dict[str, Any], metadata: dict[str, Any]) -> bool:
        have: Any = metadata.get(pred["field"])
        want: Any = pred.get("value")
        op = pred["op"]
        if have is None:
            return op in ("neq", "not_in")
        if op in ("gt", "gte", "lt", "lte") and isinstance(want, str):
            have, want = parse_instant(have), parse_instant(want)
        return {
            "eq": lambda: have == want,
            "neq": lambda: have != want,
            "in": lambda: have in want,
            "not_in": lambda: have not in want,
            "gt": lambda: have > want,
            "gte": lambda: have >= want,
            "lt": lambda: have < want,
            "lte": lambda: have <= want,
        }[op]()

    retrieval = body["retrieval"]
    filters = retrieval["filters"]
    eligible = [
        c
        for c in retrieval["exclusion_sample"]["candidates"]
        if all(ok(p, c["metadata"]) for p in filters["entitlement"])
    ]
    ranked = sorted((c for c in eligible if c["score"] >= threshold), key=lambda c: -c["score"])
    gold = {c["id"] for c in ranked[:top_k]}
    survivors = {c["id"] for c in eligible if all(ok(p, c["metadata"]) for p in filters["relevance"])}
    return bool(gold) and not gold & survivors


def rate(
    run: Callable[[], object], items: int, repeats: int, before: Callable[[], None] | None = None
) -> float:
    """Median items per second over `repeats` timed runs."""
    results = []
    for _ in range(repeats):
        if before is not None:
            before()
        started = time.perf_counter()
        run()
        results.append(items / (time.perf_counter() - started))
    return statistics.median(results)


def measure(samples: int, batch: int, repeats: int) -> dict[str, float]:
    rng = random.Random(5)
    bodies = [sample_body(rng, i) for i in range(samples)]
    parsed = [TraceBody.model_validate(b) for b in bodies]
    events = [as_event(b, p, i) for i, (b, p) in enumerate(zip(bodies, parsed, strict=True))]
    config = ExclusionConfig.model_validate(
        {"proxy_score_threshold": 0.8, "proxy_top_k": 3, "intents": ["billing"]}
    )
    proxy = ProxyGold(config.proxy_score_threshold, config.proxy_top_k)

    def pure() -> None:
        for event in events:
            plan = plan_trace(event, proxy)
            assert plan.sample is not None
            evaluate(plan.sample, plan.sample.proxy_gold, "proxy")

    results = {
        "pure": rate(pure, samples, repeats),
        "decode": rate(lambda: [TraceBody.model_validate(b) for b in bodies], samples, repeats),
        "reference": rate(lambda: [naive_false_exclusion(b, 0.8, 3) for b in bodies], samples, repeats),
    }
    server = start_redis()
    try:
        client = redis.Redis(port=server.port)
        current: list[ExclusionProcessor] = []

        def fresh() -> None:
            # Every repeat evaluates (and stores) every sample anew, with metrics from zero.
            client.flushdb()
            current[:] = [ExclusionProcessor(client, ExclusionMetrics(CollectorRegistry(), config), config)]

        def process_all() -> None:
            for start in range(0, samples, batch):
                assert current[0].process(events[start : start + batch]) == []

        results["processor"] = rate(process_all, samples, repeats, before=fresh)
        client.close()
    finally:
        server.stop()
    return results


def report(results: dict[str, float], samples: int, batch: int, repeats: int) -> str:
    verdict = "meets" if results["processor"] >= TARGET_PER_S else "MISSES"
    with_decode = 1 / (1 / results["processor"] + 1 / results["decode"])
    rows = [
        ("processor (process() + Redis + metrics)", results["processor"]),
        ("pure (plan + evaluate, no I/O)", results["pure"]),
        ("processor + body decode (one process doing both)", with_decode),
        ("decode only (TraceBody validation, the runtime's share)", results["decode"]),
        ("reference: naive evaluator (pure, no I/O)", results["reference"]),
    ]
    lines = [
        "# Exclusion worker benchmark",
        "",
        f"`python tests/bench/bench_exclusion.py` — {samples} samples of {CANDIDATES} candidates, 3 relevance and",
        f"2 entitlement predicates each; batches of {batch}; median of {repeats} repeats; one process.",
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{datetime.now(UTC):%Y-%m-%d}.",
        "",
        "| path | samples/s |",
        "|---|---:|",
        *[f"| {name} | {value:,.0f} |" for name, value in rows],
        "",
        f"Target: ≥ {TARGET_PER_S:,} samples/s per process on the processor path: **{verdict}** "
        f"({results['processor'] / TARGET_PER_S:.1f}× the target).",
        f"Pure path vs the naive reference, same samples, same run: {results['pure'] / results['reference']:.2f}×.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the Markdown report here")
    parser.add_argument("--samples", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    results = measure(args.samples, args.batch, args.repeats)
    text = report(results, args.samples, args.batch, args.repeats)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0 if results["processor"] >= TARGET_PER_S else 1


if __name__ == "__main__":
    sys.exit(main())
