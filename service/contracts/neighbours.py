"""Neighbour stability of a probe query: overlap@k and rank-biased overlap between two ranked id lists.

Pure functions shared by the probes worker (each probe against its pinned
baseline) and `ragmon probes report` (one index version against another);
docs/probes.md has the definitions and the hand-computed examples the tests
check. They live under service.contracts because that is the one package of
`service` the workers may import (docs/architecture.md, "Layering").
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_K = 10
DEFAULT_RBO_P = 0.9  # docs/probes.md: the top 10 ranks carry about 86% of the weight


def ranked(ids: Sequence[str], k: int | None = None) -> list[str]:
    """The ids in rank order without repeats (a repeated id keeps its first rank), cut at depth k."""
    seen: set[str] = set()
    out: list[str] = []
    for i in ids:
        if i not in seen:
            seen.add(i)
            out.append(i)
            if k is not None and len(out) == k:
                break
    return out


def overlap_at_k(baseline: Sequence[str], current: Sequence[str], k: int = DEFAULT_K) -> float | None:
    """|A_k ∩ B_k| / k', with k' = min(k, the longer list's length): two identical lists shorter than k
    overlap fully. None (no data) when both lists are empty."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    a, b = ranked(baseline, k), ranked(current, k)
    depth = max(len(a), len(b))
    if depth == 0:
        return None
    return len(set(a) & set(b)) / depth


def rbo(
    baseline: Sequence[str], current: Sequence[str], p: float = DEFAULT_RBO_P, k: int | None = None
) -> float | None:
    """Extrapolated rank-biased overlap, RBO_ext (Webber, Moffat and Zobel 2010, eq. 32), of two ranked
    lists each cut at depth k (None: whole lists), which may differ in length.

    With S the shorter list (length s), L the longer (length l), X_d the overlap of their first d items
    (for d > s, S contributes its s items) and A_d = X_d / d:
      RBO_ext = (1-p)/p · (Σ_{d=1..l} X_d/d · p^d + Σ_{d=s+1..l} X_s·(d-s)/(s·d) · p^d)
                + ((X_l - X_s)/l + X_s/s) · p^l
    For lists of equal length k it is (1-p)/p · Σ_{d=1..k} A_d p^d + A_k p^k. 1 for identical lists,
    0 for disjoint ones and when one list is empty; None (no data) when both are.
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    a, b = ranked(baseline, k), ranked(current, k)
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, ell = len(short), len(long_)
    if s == 0:
        return None if ell == 0 else 0.0
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    overlap = 0
    total = 0.0
    x_s = 0
    weight = 1.0
    for d in range(1, ell + 1):
        weight *= p
        item_long = long_[d - 1]
        if d <= s:
            item_short = short[d - 1]
            if item_short == item_long:
                overlap += 1
            else:
                overlap += (item_short in seen_long) + (item_long in seen_short)
            seen_short.add(item_short)
            seen_long.add(item_long)
            if d == s:
                x_s = overlap
        else:
            overlap += item_long in seen_short
            seen_long.add(item_long)
            total += x_s * (d - s) / (s * d) * weight
        total += overlap / d * weight
    return (1 - p) / p * total + ((overlap - x_s) / ell + x_s / s) * weight


def recall_at_k(gold: Sequence[str], current: Sequence[str], k: int = DEFAULT_K) -> float | None:
    """|G ∩ L_k| / |G|; None (no data) without gold."""
    g = set(gold)
    if not g:
        return None
    return len(g & set(ranked(current, k))) / len(g)
