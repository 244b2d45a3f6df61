"""A live comparison from the Redis state: the window of pairs, coverage, production latency.

Used by the worker's recompute and by `ragmon shadow report`, so both give
the same numbers.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

from workers.shadow.bootstrap import BootstrapSettings
from workers.shadow.compare import CompareSettings, compare
from workers.shadow.config import ShadowConfig, load_shadow_config
from workers.shadow.coverage import Coverage, coverage_check
from workers.shadow.outcomes import pair_row
from workers.shadow.report import render
from workers.shadow.results import Comparison
from workers.shadow.store import PRODUCTION, Counts, ShadowStore
from workers.shadow.table import build_table


def compare_settings(config: ShadowConfig, resamples: int | None = None, seed: int = 7) -> CompareSettings:
    return CompareSettings(
        alpha=config.alpha,
        min_pairs=config.min_pairs,
        tight_at=config.tight_at,
        margins=dict(config.margins),
        effects=dict(config.effects),
        bootstrap=BootstrapSettings(resamples=resamples or config.resamples, seed=seed),
    )


def coverage(
    store: ShadowStore, config: ShadowConfig, tenant: str, candidate: str, counts: Counts | None = None
) -> Coverage:
    """Share of production requests (since the candidate's first event) with a twin of this candidate,
    with its exact binomial interval, against the configured shadow rate (workers/shadow/coverage.py)."""
    counts = counts or store.counts(tenant)
    # production traces since its first event, plus those before it that were paired later (in flight then)
    production = (counts.seen.get(PRODUCTION, 0) - counts.base.get(candidate, 0)) + counts.early.get(
        candidate, 0
    )
    return coverage_check(
        production,
        counts.seen.get(candidate, 0),
        counts.paired.get(candidate, 0),
        config.expected_shadow_rate.get(candidate),
        config.coverage_alpha,
    )


def production_latency(store: ShadowStore, tenant: str) -> dict[str, Any]:
    """Production total latency while a candidate runs against before (the shadow must not slow production)."""
    before, during = store.production_latencies(tenant)
    out: dict[str, Any] = {"before_n": len(before), "during_n": len(during)}
    for name, values in (("before", before), ("during", during)):
        out[f"{name}_p50_seconds"] = float(np.percentile(values, 50)) if values else None
        out[f"{name}_p95_seconds"] = float(np.percentile(values, 95)) if values else None
    if out["before_p95_seconds"] and out["during_p95_seconds"] is not None:
        out["p95_ratio"] = out["during_p95_seconds"] / out["before_p95_seconds"]
    else:
        out["p95_ratio"] = None
    return out


def live_comparison(
    store: ShadowStore,
    config: ShadowConfig,
    tenant: str,
    candidate: str,
    settings: CompareSettings | None = None,
) -> tuple[Comparison, int]:
    """(comparison, pairs in the window)."""
    rows = store.window(tenant, candidate)
    table = build_table(pair_row(fields, candidate) for _, fields in rows)
    result = compare(table, settings or compare_settings(config))
    result.context.update(
        {
            "tenant": tenant,
            "candidate": candidate,
            **{f"coverage.{k}": v for k, v in coverage(store, config, tenant, candidate).to_dict().items()},
            **{f"production_latency.{k}": v for k, v in production_latency(store, tenant).items()},
        }
    )
    return result, len(rows)


def live_report(args: argparse.Namespace) -> int:
    import redis

    config = load_shadow_config()
    url = args.redis_url or os.environ.get("RAGMON_REDIS_URL", "redis://127.0.0.1:6379/0")
    store = ShadowStore(redis.Redis.from_url(url, socket_timeout=5), config)
    if (args.tenant, args.candidate) not in store.candidates():
        print(
            f"ragmon shadow report: no candidate {args.candidate!r} for tenant {args.tenant!r} in {url}",
            file=sys.stderr,
        )
        return 2
    settings = compare_settings(config, resamples=args.resamples, seed=args.seed)
    comparison, pairs = live_comparison(store, config, args.tenant, args.candidate, settings)
    if pairs == 0:
        print(f"ragmon shadow report: {args.tenant}/{args.candidate}: no pairs yet", file=sys.stderr)
    print(render(comparison, args.format))
    return 0
