"""Prometheus series of the shadow worker.

The comparison series are a snapshot of the last recompute (read back from
Redis by every replica, so they agree), exported by a collector: a window's
wins are not a counter, so they are gauges over the window. Labels: tenant,
candidate (at most max_candidates_per_tenant per tenant), metric (the closed
set of outcomes), slice ("all", or "dimension=value" from configured closed
sets). Never a request id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from workers.shadow.results import Comparison

VERDICTS = ("better", "worse", "equivalent", "inconclusive", "not_enough_data")
TCM = ["tenant", "candidate", "metric", "slice"]


def _families() -> dict[str, GaugeMetricFamily]:
    g = GaugeMetricFamily
    return {
        "delta": g("ragmon_shadow_delta", "Candidate minus production, mean over the window's pairs (metric units)",
                   labels=TCM),
        "lower": g("ragmon_shadow_interval_lower", "Lower bound of the difference (method: anytime | bootstrap)",
                   labels=[*TCM, "method"]),
        "upper": g("ragmon_shadow_interval_upper", "Upper bound of the difference (method: anytime | bootstrap)",
                   labels=[*TCM, "method"]),
        "wins": g("ragmon_shadow_wins", "Pairs in the window where the candidate did better", labels=TCM),
        "losses": g("ragmon_shadow_losses", "Pairs in the window where the candidate did worse", labels=TCM),
        "ties": g("ragmon_shadow_ties", "Pairs in the window with equal outcomes", labels=TCM),
        "p": g("ragmon_shadow_p_value", "p-value of no difference (test: sign | anytime_holm)", labels=[*TCM, "test"]),
        "verdict": g("ragmon_shadow_verdict", "1 for the metric's current verdict", labels=[*TCM[:3], "verdict"]),
        "masked": g("ragmon_shadow_masked_regression", "1 when this slice is worse while the whole is better; "
                    "value label-free, size in ragmon_shadow_slice_pairs", labels=TCM),
        "slice_pairs": g("ragmon_shadow_slice_pairs", "Pairs with this metric in the slice", labels=TCM),
        "detectable": g("ragmon_shadow_detectable_effect", "Smallest difference detectable at 80% power now",
                        labels=TCM[:3]),
        "needed": g("ragmon_shadow_pairs_needed", "Pairs needed for the configured effect of interest",
                    labels=TCM[:3]),
        "pairs": g("ragmon_shadow_window_pairs", "Pairs in the window the statistics ran on", labels=TCM[:2]),
        "coverage": g("ragmon_shadow_coverage_ratio", "Production requests with a twin of this candidate",
                      labels=TCM[:2]),
        "unpaired": g("ragmon_shadow_unpaired_traces", "Traces without a twin (so far), per variant",
                      labels=[*TCM[:2], "variant"]),
        "prod_p95": g("ragmon_shadow_production_latency_p95_seconds",
                      "Production total latency p95 while a candidate runs or before (period)",
                      labels=["tenant", "period"]),
    }


class ShadowSnapshot(Collector):
    """Exports the last comparison of every (tenant, candidate)."""

    def __init__(self) -> None:
        self._latest: dict[tuple[str, str], Comparison] = {}
        self._latency: dict[str, dict[str, Any]] = {}

    def update(self, tenant: str, candidate: str, comparison: Comparison) -> None:
        self._latest[(tenant, candidate)] = comparison
        self._latency[tenant] = {k.split(".", 1)[1]: v for k, v in comparison.context.items()
                                 if k.startswith("production_latency.")}

    def collect(self) -> Iterator[Metric]:
        f = _families()
        for (tenant, cand), c in sorted(self._latest.items()):
            _add_comparison(f, tenant, cand, c)
        for tenant, lat in sorted(self._latency.items()):
            for period in ("before", "during"):
                if lat.get(f"{period}_p95_seconds") is not None:
                    f["prod_p95"].add_metric([tenant, period], lat[f"{period}_p95_seconds"])
        yield from f.values()


def _put(family: GaugeMetricFamily, labels: list[str], value: float | None) -> None:
    if value is not None and value == value and abs(value) != float("inf"):
        family.add_metric(labels, value)


def _add_comparison(f: dict[str, GaugeMetricFamily], tenant: str, cand: str, c: Comparison) -> None:
    ctx = c.context
    _put(f["pairs"], [tenant, cand], float(c.pairs))
    _put(f["coverage"], [tenant, cand], ctx.get("coverage.coverage"))
    _put(f["unpaired"], [tenant, cand, "production"], ctx.get("coverage.unpaired_production"))
    _put(f["unpaired"], [tenant, cand, "candidate"], ctx.get("coverage.unpaired_candidate"))
    for r in c.metrics:
        labels = [tenant, cand, r.metric, "all"]
        _put(f["delta"], labels, r.delta)
        for method, lo, hi in (("anytime", r.cs_lower, r.cs_upper), ("bootstrap", r.bootstrap_lower,
                                                                      r.bootstrap_upper)):
            _put(f["lower"], [*labels, method], lo)
            _put(f["upper"], [*labels, method], hi)
        for name, value in (("wins", r.wins), ("losses", r.losses), ("ties", r.ties), ("slice_pairs", r.n)):
            _put(f[name], labels, float(value))
        _put(f["p"], [*labels, "sign"], r.sign_p)
        _put(f["p"], [*labels, "anytime_holm"], r.anytime_p_holm)
        for verdict in VERDICTS:
            f["verdict"].add_metric([tenant, cand, r.metric, verdict], 1.0 if r.verdict == verdict else 0.0)
        _put(f["detectable"], labels[:3], r.detectable_effect)
        _put(f["needed"], labels[:3], r.pairs_needed)
    for s in c.slices:
        labels = [tenant, cand, s.metric, f"{s.dimension}={s.value}"]
        _put(f["delta"], labels, s.delta)
        _put(f["lower"], [*labels, "bootstrap"], s.bootstrap_lower)
        _put(f["upper"], [*labels, "bootstrap"], s.bootstrap_upper)
        for name, value in (("wins", s.wins), ("losses", s.losses), ("ties", s.ties), ("slice_pairs", s.n)):
            _put(f[name], labels, float(value))
        _put(f["p"], [*labels, "sign"], s.sign_p)
        f["masked"].add_metric(labels, 1.0 if s.masked_regression else 0.0)


class ShadowMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.snapshot = ShadowSnapshot()
        r.register(self.snapshot)
        self.events = Counter("ragmon_shadow_events_total", "Trace and score events applied (first delivery), "
                              "by kind", ["tenant", "kind"], registry=r)
        self.pairs = Counter("ragmon_shadow_pairs_formed_total", "Pairs formed by this process",
                             ["tenant", "candidate"], registry=r)
        self.refused = Counter("ragmon_shadow_candidates_refused_total", "Candidate events dropped: the tenant "
                               "already has max_candidates_per_tenant candidates", ["tenant"], registry=r)
        self.recompute_seconds = Histogram(
            "ragmon_shadow_recompute_duration_seconds", "Time to recompute one comparison", ["tenant"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30), registry=r)
        self.recomputes = Counter("ragmon_shadow_recomputes_total", "Comparisons recomputed by this process",
                                  ["tenant", "candidate"], registry=r)
