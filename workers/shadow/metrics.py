"""Prometheus series of the shadow worker.

The comparison series are the last recompute of each (tenant, candidate),
read back from Redis by every replica so they agree; a window's wins are not
a counter, so they are gauges over the window. Labels: tenant, candidate (at
most max_candidates_per_tenant per tenant), metric (the closed set of
outcomes), slice ("all", or "dimension=value" from configured closed sets).
Never a request id. A candidate that left its window (candidate_window_s, no
event for that long) has its series removed from the registry (forget_others).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from service.contracts.stats import is_finite
from workers.runtime.families import Families
from workers.runtime.labels import families_with, prune
from workers.shadow.coverage import Coverage
from workers.shadow.results import Comparison

VERDICTS = ("better", "worse", "equivalent", "inconclusive", "not_enough_data")
TCMS = ["tenant", "candidate", "metric", "slice"]
Values = dict[str, dict[tuple[str, ...], float]]


def _comparison_gauges(registry: CollectorRegistry) -> dict[str, Gauge]:
    gauge = Families(registry, TCMS).gauge
    return {
        "delta": gauge(
            "ragmon_shadow_delta",
            "Candidate minus production, mean over the window's pairs (the metric's units)",
        ),
        "lower": gauge(
            "ragmon_shadow_interval_lower",
            "Lower bound of the difference (method: anytime, the "
            "verdict's confidence sequence; bootstrap, fixed-n 95%)",
            [*TCMS, "method"],
        ),
        "upper": gauge(
            "ragmon_shadow_interval_upper",
            "Upper bound of the difference (method: anytime | bootstrap)",
            [*TCMS, "method"],
        ),
        "wins": gauge("ragmon_shadow_wins", "Pairs in the window where the candidate did better"),
        "losses": gauge("ragmon_shadow_losses", "Pairs in the window where the candidate did worse"),
        "ties": gauge("ragmon_shadow_ties", "Pairs in the window with equal outcomes"),
        "pairs": gauge("ragmon_shadow_slice_pairs", "Pairs in the window with this metric, in the slice"),
        "p": gauge(
            "ragmon_shadow_p_value_ratio",
            "p-value of no difference (test: sign, fixed-n exact; anytime_holm, the verdict's)",
            [*TCMS, "test"],
        ),
        "verdict": gauge(
            "ragmon_shadow_verdict",
            "1 for the metric's current verdict, 0 for the others",
            [*TCMS[:3], "verdict"],
        ),
        "masked": gauge(
            "ragmon_shadow_masked_regression",
            "1 when this slice is worse while the whole is better (its size: ragmon_shadow_slice_pairs)",
        ),
        "detectable": gauge(
            "ragmon_shadow_detectable_effect",
            "Smallest difference detectable at 80% power with the current pairs",
            TCMS[:3],
        ),
        "needed": gauge(
            "ragmon_shadow_pairs_needed", "Pairs needed for the configured effect of interest", TCMS[:3]
        ),
        "window": gauge("ragmon_shadow_window_pairs", "Pairs in the window the statistics ran on", TCMS[:2]),
    }


class ShadowMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        f = Families(registry)
        self.gauges = _comparison_gauges(registry)
        for (
            name,
            gauge,
        ) in self.gauges.items():  # also as attributes: tools that list a class's metrics see them
            setattr(self, f"{name}_gauge", gauge)
        self.production_p95 = f.gauge(
            "ragmon_shadow_production_latency_p95_duration_seconds",
            "Production total latency p95 before any candidate ran and while one runs (period)",
            ["tenant", "period"],
        )
        pair = TCMS[:2]
        self.coverage = f.gauge(
            "ragmon_shadow_coverage_ratio",
            "Share of production requests (since the candidate's first event) with a twin of this candidate",
            pair,
        )
        self.coverage_lower = f.gauge(
            "ragmon_shadow_coverage_interval_lower_ratio",
            "Lower bound of the coverage's exact binomial interval (confidence 1 - coverage_alpha)",
            pair,
        )
        self.coverage_upper = f.gauge(
            "ragmon_shadow_coverage_interval_upper_ratio",
            "Upper bound of the coverage's exact binomial interval",
            pair,
        )
        self.expected_coverage = f.gauge(
            "ragmon_shadow_expected_coverage_ratio",
            "The candidate's configured shadow rate (expected_shadow_rate)",
            pair,
        )
        self.coverage_mismatch = f.gauge(
            "ragmon_shadow_coverage_mismatch_detected",
            "1 when the configured shadow "
            "rate lies outside the coverage's interval: pairs are lost, or the app "
            "shadows another share",
            pair,
        )
        self.unpaired = f.gauge(
            "ragmon_shadow_unpaired_traces",
            "Traces without a twin so far, by role (production or candidate)",
            [*pair, "role"],
        )
        self.events = f.counter(
            "ragmon_shadow_events_total",
            "Trace and score events applied (first delivery), by kind",
            ["tenant", "kind"],
        )
        self.pairs_formed = f.counter(
            "ragmon_shadow_pairs_formed_total",
            "Pairs formed by this process (each pair once across replicas and redeliveries)",
            ["tenant"],
        )
        self.refused = f.counter(
            "ragmon_shadow_candidates_refused_total",
            "Candidate events dropped: the tenant already has max_candidates_per_tenant live candidates",
            ["tenant"],
        )
        self.recompute_seconds = f.histogram(
            "ragmon_shadow_recompute_duration_seconds",
            "Time to recompute one comparison",
            ["tenant"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
        )
        self.tick_errors = f.counter(
            "ragmon_shadow_tick_errors_total",
            "Scheduled recomputes skipped because Redis failed, by error type",
            ["error"],
        )
        self.recomputes = f.counter(
            "ragmon_shadow_recomputes_total",
            "Comparisons recomputed by this process",
            ["tenant", "candidate"],
        )
        self.candidates_expired = f.counter(
            "ragmon_shadow_candidates_expired_total",
            "Candidates that left (no event for candidate_window_s): their state and series removed",
            ["tenant"],
        )
        self._published: dict[tuple[str, str], dict[str, set[tuple[str, ...]]]] = {}
        self._exported: set[tuple[str, str]] = set()  # (tenant, candidate) with series in this registry
        self._by_candidate = families_with(vars(self).values(), "candidate")

    def forget_others(self, live: set[tuple[str, str]]) -> list[tuple[str, str]]:
        """Remove the series of every (tenant, candidate) not in `live` (the candidates in Redis): one that
        left its window on any replica stops being exported by every replica. Returns those removed."""
        gone = sorted(self._exported - live)
        for tenant, candidate in gone:
            prune(self._by_candidate, {"tenant": tenant, "candidate": candidate})
            self._published.pop((tenant, candidate), None)
        self._exported &= live
        return gone

    def publish_coverage(self, tenant: str, candidate: str, cov: Coverage) -> None:
        """Coverage from the live counts (every replica, every publish), not only at a recompute."""
        self._exported.add((tenant, candidate))
        for gauge, value in (
            (self.coverage, cov.coverage),
            (self.coverage_lower, cov.lower),
            (self.coverage_upper, cov.upper),
            (self.expected_coverage, cov.expected_coverage),
        ):
            if value is None:  # no production traffic, or no configured rate: no data, never 0
                with contextlib.suppress(KeyError):
                    gauge.remove(tenant, candidate)
            else:
                gauge.labels(tenant, candidate).set(value)
        if cov.coverage is not None and cov.expected_coverage is not None:
            self.coverage_mismatch.labels(tenant, candidate).set(1.0 if cov.coverage_off else 0.0)
        self.unpaired.labels(tenant, candidate, "production").set(cov.unpaired_production)
        self.unpaired.labels(tenant, candidate, "candidate").set(cov.unpaired_candidate)

    def publish(self, tenant: str, candidate: str, comparison: Comparison) -> None:
        """Set this comparison's series and withdraw the ones it no longer has (e.g. a slice that left)."""
        values = comparison_values(tenant, candidate, comparison)
        self._exported.add((tenant, candidate))
        before = self._published.get((tenant, candidate), {})
        for name, gauge in self.gauges.items():
            for labels, value in values[name].items():
                gauge.labels(*labels).set(value)
            for gone in before.get(name, set()) - values[name].keys():
                gauge.remove(*gone)
        self._published[(tenant, candidate)] = {name: set(v) for name, v in values.items()}
        latency = {
            k.split(".", 1)[1]: v
            for k, v in comparison.context.items()
            if k.startswith("production_latency.")
        }
        for period in ("before", "during"):
            if latency.get(f"{period}_p95_seconds") is not None:
                self.production_p95.labels(tenant, period).set(latency[f"{period}_p95_seconds"])


def comparison_values(tenant: str, cand: str, c: Comparison) -> Values:
    out: Values = defaultdict(dict)

    def put(name: str, labels: tuple[str, ...], value: Any) -> None:
        if is_finite(value):
            out[name][labels] = float(value)

    put("window", (tenant, cand), c.pairs)
    for r in c.metrics:
        base = (tenant, cand, r.metric, "all")
        put("delta", base, r.delta)
        for method, lo, hi in (
            ("anytime", r.cs_lower, r.cs_upper),
            ("bootstrap", r.bootstrap_lower, r.bootstrap_upper),
        ):
            put("lower", (*base, method), lo)
            put("upper", (*base, method), hi)
        for name, value in (("wins", r.wins), ("losses", r.losses), ("ties", r.ties), ("pairs", r.n)):
            put(name, base, value)
        put("p", (*base, "sign"), r.sign_p)
        put("p", (*base, "anytime_holm"), r.anytime_p_holm)
        for verdict in VERDICTS:
            put("verdict", (tenant, cand, r.metric, verdict), 1.0 if r.verdict == verdict else 0.0)
        put("detectable", base[:3], r.detectable_effect)
        put("needed", base[:3], r.pairs_needed)
    for s in c.slices:
        labels = (tenant, cand, s.metric, f"{s.dimension}={s.value}")
        put("delta", labels, s.delta)
        put("lower", (*labels, "bootstrap"), s.bootstrap_lower)
        put("upper", (*labels, "bootstrap"), s.bootstrap_upper)
        for name, value in (("wins", s.wins), ("losses", s.losses), ("ties", s.ties), ("pairs", s.n)):
            put(name, labels, value)
        put("p", (*labels, "sign"), s.sign_p)
        put("masked", labels, 1.0 if s.masked_regression else 0.0)
    return out
