"""`ragmon probes report --tenant T --from A --to B`: is version B at least as good as A on the probes?

Each probe's latest result under A and under B (any variant: B may be a candidate index replayed before
it serves) is paired. Where the probe has gold, the paired difference of recall@k (B - A) is averaged and
a paired percentile bootstrap over probes (resampling whole probes, so both versions' results of one probe
stay together) gives its interval. B is "at least as good" when the interval's lower end is at or above
-margin (non-inferiority at the stated confidence); "worse" when its upper end is below -margin; else
"inconclusive". Without gold there is no verdict, only how far the neighbours moved (overlap@k and RBO of
B against A, with intervals): docs/probes.md, "The before/after report".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from service.contracts.neighbours import DEFAULT_K, DEFAULT_RBO_P, overlap_at_k, rbo, recall_at_k
from service.retrieval.aggregate import resample_counts

DEFAULT_MIN_PROBES = 10
DEFAULT_RESAMPLES = 2000

_PAIRED = """
WITH latest AS (
    SELECT DISTINCT ON (probe_set, query_id, embedding_model, index_version)
           probe_set, query_id, embedding_model, index_version, retrieved_ids
    FROM probe_result WHERE tenant = %(t)s AND (%(s)s::text IS NULL OR probe_set = %(s)s)
      AND ((embedding_model = %(am)s AND index_version = %(ai)s) OR (embedding_model = %(bm)s AND index_version = %(bi)s))
    ORDER BY probe_set, query_id, embedding_model, index_version, observed_at DESC, id DESC)
SELECT a.probe_set, a.query_id, a.retrieved_ids, b.retrieved_ids, q.gold_ids
FROM latest a JOIN latest b ON a.probe_set = b.probe_set AND a.query_id = b.query_id
LEFT JOIN probe_query q ON q.tenant = %(t)s AND q.probe_set = a.probe_set AND q.query_id = a.query_id
WHERE a.embedding_model = %(am)s AND a.index_version = %(ai)s AND b.embedding_model = %(bm)s AND b.index_version = %(bi)s
ORDER BY a.probe_set, a.query_id
"""


@dataclass(frozen=True)
class ReportOptions:
    k: int = DEFAULT_K
    rbo_p: float = DEFAULT_RBO_P
    margin: float = 0.0  # how much worse on recall@k B may be and still count as "at least as good"
    confidence: float = 0.95
    min_probes: int = DEFAULT_MIN_PROBES
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0


def paired_interval(
    values: list[float], options: ReportOptions, salt: int = 0
) -> tuple[float, float, float] | None:
    """(mean, low, high) of per-probe values with a percentile bootstrap over probes; None without data."""
    if not values:
        return None
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng([options.seed, salt])
    means = resample_counts(rng, len(data), options.resamples).astype(np.float64) @ data / len(data)
    tail = (1 - options.confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(data.mean()), float(low), float(high)


def _summary(values: list[float], options: ReportOptions, salt: int) -> dict[str, Any]:
    found = paired_interval(values, options, salt)
    if found is None:
        return {"n": 0, "mean": None, "interval": None}
    mean, low, high = found
    return {"n": len(values), "mean": mean, "interval": {"low": low, "high": high}}


def compare_versions(
    conn: psycopg.Connection,
    tenant: str,
    before: tuple[str, str],
    after: tuple[str, str],
    probe_set: str | None = None,
    options: ReportOptions | None = None,
) -> dict[str, Any]:
    o = options or ReportOptions()
    key = {"t": tenant, "s": probe_set, "am": before[0], "ai": before[1], "bm": after[0], "bi": after[1]}
    rows = conn.execute(_PAIRED, key).fetchall()
    overlaps, rbos, recall_a, recall_b, diffs = [], [], [], [], []
    for _set, _query, a_ids, b_ids, gold in rows:
        overlap, similarity = overlap_at_k(a_ids, b_ids, o.k), rbo(a_ids, b_ids, o.rbo_p, o.k)
        if overlap is not None and similarity is not None:
            overlaps.append(overlap)
            rbos.append(similarity)
        ra, rb = recall_at_k(gold or [], a_ids, o.k), recall_at_k(gold or [], b_ids, o.k)
        if ra is not None and rb is not None:
            recall_a.append(ra)
            recall_b.append(rb)
            diffs.append(rb - ra)
    diff = _summary(diffs, o, 3)
    verdict, message = _verdict(diff, o)
    return {
        "tenant": tenant,
        "probe_set": probe_set,
        "from": {"embedding_model": before[0], "index_version": before[1]},
        "to": {"embedding_model": after[0], "index_version": after[1]},
        "k": o.k,
        "paired_probes": len(rows),
        "overlap_at_k": _summary(overlaps, o, 1),
        "rbo": _summary(rbos, o, 2),
        "gold_recall_from": _summary(recall_a, o, 4),
        "gold_recall_to": _summary(recall_b, o, 5),
        "gold_recall_difference": diff,
        "margin": o.margin,
        "confidence": o.confidence,
        "verdict": verdict,
        "message": message,
    }


def _verdict(diff: dict[str, Any], o: ReportOptions) -> tuple[str, str]:
    n = diff["n"]
    if n == 0:
        return "no data", "no probe with gold ids has results of both versions: no verdict on quality"
    if n < o.min_probes:
        return "too few probes", f"{n} probes with gold and results of both versions, {o.min_probes} needed"
    low, high = diff["interval"]["low"], diff["interval"]["high"]
    pct = f"{o.confidence:.0%}"
    if low >= -o.margin:
        return "at least as good", (
            f"recall@{o.k} difference {diff['mean']:+.3f} [{low:+.3f}, {high:+.3f}] ({pct}, n={n}): "
            f"the new version is at least as good on the probes (margin {o.margin})"
        )
    if high < -o.margin:
        return "worse", (
            f"recall@{o.k} difference {diff['mean']:+.3f} [{low:+.3f}, {high:+.3f}] ({pct}, n={n}): "
            "the new version is worse on the probes"
        )
    return "inconclusive", (
        f"recall@{o.k} difference {diff['mean']:+.3f} [{low:+.3f}, {high:+.3f}] ({pct}, n={n}): "
        "cannot tell; add probes with gold"
    )


def render_text(r: dict[str, Any]) -> str:
    def fmt(s: dict[str, Any]) -> str:
        if s["mean"] is None:
            return "no data"
        i = s["interval"]
        return f"{s['mean']:.3f} [{i['low']:.3f}, {i['high']:.3f}] (n={s['n']})"

    a, b = r["from"], r["to"]
    lines = [
        f"probes of {r['tenant']}{'' if r['probe_set'] is None else ' / ' + r['probe_set']}: "
        f"{a['embedding_model']}@{a['index_version']} -> {b['embedding_model']}@{b['index_version']}, "
        f"{r['paired_probes']} probes with results of both",
        f"  overlap@{r['k']}           {fmt(r['overlap_at_k'])}",
        f"  RBO                  {fmt(r['rbo'])}",
        f"  gold recall@{r['k']} from  {fmt(r['gold_recall_from'])}",
        f"  gold recall@{r['k']} to    {fmt(r['gold_recall_to'])}",
        f"  difference (to-from) {fmt(r['gold_recall_difference'])}",
        f"  verdict: {r['verdict']}: {r['message']}",
    ]
    return "\n".join(lines)
