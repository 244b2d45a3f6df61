"""One comparison (a candidate against production) over a PairTable: every metric, every slice.

Fixed-n statistics (exact sign test, paired bootstrap) are reported beside the
anytime-valid confidence sequence; the verdict uses the latter, with Holm's
correction across the metrics (see docs/shadow.md).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace

import numpy as np

from workers.shadow.bootstrap import BootstrapSettings, mean_difference_intervals, p95_ratio_interval
from workers.shadow.metrics_spec import MetricSpec, spec_for
from workers.shadow.results import Comparison, MetricResult, SliceResult
from workers.shadow.sequential import confidence_sequence
from workers.shadow.signtest import holm, sign_test_p
from workers.shadow.table import PairTable
from workers.shadow.verdict import attach_power, judge


@dataclass(frozen=True)
class CompareSettings:
    alpha: float = 0.05
    min_pairs: int = 30
    min_discordant: int = 10  # binary: fewer discordant pairs than this never make a better/worse verdict
    tight_at: int = 1_000  # pairs at which the confidence sequence is tightest
    power: float = 0.8
    bootstrap: BootstrapSettings = field(default_factory=BootstrapSettings)
    specs: dict[str, MetricSpec] = field(default_factory=dict)  # overrides of the builtin specs
    margins: dict[str, float] = field(default_factory=dict)  # metric -> margin (config `shadow.margins`)
    effects: dict[str, float] = field(default_factory=dict)  # metric -> effect of interest (`shadow.effects`)


def _configured(spec: MetricSpec, settings: CompareSettings) -> MetricSpec:
    margin, effect = settings.margins.get(spec.name), settings.effects.get(spec.name)
    if margin is None and effect is None:
        return spec
    return replace(
        spec,
        margin=spec.margin if margin is None else margin,
        effect=spec.effect if effect is None else effect,
    )


def compare(table: PairTable, settings: CompareSettings | None = None) -> Comparison:
    settings = settings or CompareSettings()
    specs = [
        _configured(settings.specs.get(m) or spec_for(m, table.is_binary(j)), settings)
        for j, m in enumerate(table.metrics)
    ]
    diffs = table.candidate - table.production
    rng = np.random.default_rng(settings.bootstrap.seed)
    intervals = mean_difference_intervals(diffs, settings.bootstrap, rng)
    results = [
        _metric_result(table, j, spec, diffs[:, j], intervals[j], settings) for j, spec in enumerate(specs)
    ]
    for r, p in zip(results, holm([r.sign_p for r in results]), strict=True):
        r.sign_p_holm = p
    for r, p in zip(results, holm([r.anytime_p for r in results]), strict=True):
        r.anytime_p_holm = p
    for r, spec in zip(results, specs, strict=True):
        r.verdict, r.reason = judge(r, spec, settings.alpha, settings.min_pairs, settings.min_discordant)
        attach_power(r, spec, settings.alpha, settings.power)
        if spec.p95_ratio:
            _attach_p95_ratio(r, table, table.metrics.index(spec.name), settings.bootstrap)
    slices = _slice_results(table, specs, diffs, results, settings)
    return Comparison(
        pairs=table.pairs,
        alpha=settings.alpha,
        metrics=results,
        slices=slices,
        masked_regressions=[s for s in slices if s.masked_regression],
    )


def _counts(spec: MetricSpec, d: np.ndarray) -> tuple[int, int, int]:
    gain = d * spec.direction
    return int((gain > 0).sum()), int((gain < 0).sum()), int((gain == 0).sum())


def _metric_result(
    table: PairTable, j: int, spec: MetricSpec, d: np.ndarray, interval: np.ndarray, settings: CompareSettings
) -> MetricResult:
    both = ~np.isnan(d)
    dv = d[both]
    wins, losses, ties = _counts(spec, dv)
    n = int(dv.size)
    mean = float(dv.mean()) if n else float("nan")
    var = float(dv.var(ddof=1)) if n > 1 else float("nan")
    cs = confidence_sequence(n, mean, var, settings.alpha, settings.tight_at)
    return MetricResult(
        metric=spec.name,
        binary=spec.binary,
        higher_is_better=spec.higher_is_better,
        judgement=spec.judgement,
        margin=spec.margin,
        n=n,
        production_mean=_mean(table.production[both, j]),
        candidate_mean=_mean(table.candidate[both, j]),
        delta=mean,
        sd=var**0.5 if n > 1 else float("nan"),
        wins=wins,
        losses=losses,
        ties=ties,
        sign_p=sign_test_p(wins, losses),
        bootstrap_lower=float(interval[0]),
        bootstrap_upper=float(interval[1]),
        cs_lower=cs.lower,
        cs_upper=cs.upper,
        anytime_p=cs.p_value,
    )


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else float("nan")


def _attach_p95_ratio(r: MetricResult, table: PairTable, j: int, boot: BootstrapSettings) -> None:
    rng = np.random.default_rng([boot.seed, 95])
    r.p95_ratio, r.p95_ratio_lower, r.p95_ratio_upper = p95_ratio_interval(
        table.production[:, j], table.candidate[:, j], boot, rng
    )


def _slice_results(
    table: PairTable,
    specs: list[MetricSpec],
    diffs: np.ndarray,
    whole: list[MetricResult],
    settings: CompareSettings,
) -> list[SliceResult]:
    out: list[SliceResult] = []
    for dim in sorted(table.slices):
        values, codes = np.unique(table.slices[dim].astype(str), return_inverse=True)
        for code, value in enumerate(values):
            if not value:
                continue  # no label for this dimension
            mask = codes == code
            rng = np.random.default_rng([settings.bootstrap.seed, zlib.crc32(f"{dim}={value}".encode())])
            intervals = mean_difference_intervals(diffs[mask], settings.bootstrap, rng)
            for j, spec in enumerate(specs):
                out.append(_slice_result(dim, value, spec, diffs[mask, j], intervals[j], whole[j]))
    return out


def _slice_result(
    dim: str, value: str, spec: MetricSpec, d: np.ndarray, interval: np.ndarray, whole: MetricResult
) -> SliceResult:
    dv = d[~np.isnan(d)]
    wins, losses, ties = _counts(spec, dv)
    delta = float(dv.mean()) if dv.size else float("nan")
    lower, upper = float(interval[0]), float(interval[1])
    worse_here = losses > wins and delta * spec.direction < 0
    masked = whole.whole_is_better() and worse_here
    surely_worse = (upper < 0) if spec.higher_is_better else (lower > 0)
    return SliceResult(
        dimension=dim,
        value=value,
        metric=spec.name,
        n=int(dv.size),
        wins=wins,
        losses=losses,
        ties=ties,
        delta=delta,
        bootstrap_lower=lower,
        bootstrap_upper=upper,
        sign_p=sign_test_p(wins, losses),
        masked_regression=masked,
        strength=("significant" if surely_worse else "lead") if masked else "",
    )
