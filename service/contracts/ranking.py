"""Retrieval metrics of one trace against its gold: Hit@k, Recall@k, Precision@k, nDCG@k and MRR.

Definitions (the same as trec_eval's `success_k`, `recall_k`, `P_k`,
`ndcg_cut_k` and `recip_rank`; tests/service/contracts/test_ranking.py checks equality):

- The ranking is the order the app sent the ids in. A repeated id counts at
  its first place only: later copies are dropped and the ids after them move
  up (the app showed the document once; trec_eval cannot even represent a
  repeat).
- Gold is a set of ids, or a mapping id -> grade (graded relevance). A grade
  above 0 is relevant; a grade of 0 or below is a judged non-relevant
  document and not gold. Hit, Recall, Precision and MRR use relevance only;
  nDCG uses the grade as the gain (trec_eval's linear gain), discounted by
  log2(rank + 1), over the ideal ordering of all gold grades.
- Hit@k: 1 when a gold id is among the first k, else 0.
- Recall@k: gold ids among the first k / gold ids.
- Precision@k: gold ids among the first k / k. k is the divisor even when the
  list is shorter than k (trec_eval's choice): an app that sends 2 documents
  of which 1 is gold has Precision@10 = 0.1, not 0.5. Precision is a property
  of the top-k slots, and an empty slot holds no gold.
- nDCG@k: DCG of the first k / DCG of the ideal first k (all gold grades in
  decreasing order, cut at k; a list shorter than k is padded with non-gold).
- MRR (reciprocal rank): 1 / the rank of the first gold id anywhere in the
  list (no cut-off), 0 when none is there. Averaged over traces it is MRR.
- An empty list with gold scores 0 on every metric: the app retrieved
  nothing, a total miss. A list that was not reported at all (None) has no
  data; it is not an empty list.
- No gold (no id with a grade above 0 after entitlement, below) -> no data:
  the trace is not counted, never scored 0. A metric averaged over such
  traces would read as a retriever that never finds anything.

Entitlement, as the false-exclusion evaluation counts it
(workers/exclusion/evaluate.py): a gold id that violates an entitlement
predicate (`not_entitled`) is left out of both numerator and denominator.
The app must not show it, so not finding it is no miss; it is counted
(`GoldSet.not_entitled`) so that its share stays visible. Such an id that
the app did return still occupies its rank as a non-gold document: the
generator saw it in that slot (a leak, which is counted elsewhere).

Two stages per trace: the retrieved candidates and the context given to the
generator, each ranked and scored as above. Two indicators per trace tell
where gold was lost:

- `dropped` = 1 when at least one gold id is among the candidates but not in
  the context: a reranker or packer drop (needs both lists);
- `missed` = 1 when no gold id is among the candidates at all: a retriever
  miss (needs the candidates).

They exclude each other; averaged over traces they are the share of traces
with a drop and with a miss. Gold that reaches the context without being
among the candidates (a document the app added itself) scores in the
context stage and leaves `missed` at 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)
STAGES: tuple[str, ...] = ("retrieved", "context")
RANK_METRICS: tuple[str, ...] = ("hit", "recall", "precision", "ndcg")
TRACE_METRICS: tuple[str, ...] = ("dropped", "missed")


def parse_ks(text: str) -> tuple[int, ...]:
    """'1,3,5,10' -> (1, 3, 5, 10): positive, distinct, sorted."""
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise ValueError(f"k must be comma-separated positive integers, not {text!r}") from exc
    if not ks or ks[0] < 1:
        raise ValueError(f"k must be comma-separated positive integers, not {text!r}")
    return tuple(ks)


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    """Per-stage metric names in report order: hit@1 .. ndcg@10, mrr."""
    return [f"{m}@{k}" for m in RANK_METRICS for k in ks] + ["mrr"]


def column_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    """Every column `batch_metrics` returns: 'retrieved.recall@5', ..., 'dropped', 'missed'."""
    return [f"{stage}.{name}" for stage in STAGES for name in metric_names(ks)] + list(TRACE_METRICS)


@dataclass(frozen=True)
class GoldSet:
    """The gold of one trace: entitled id -> grade (> 0), and how many gold ids were not entitled."""

    grades: Mapping[str, float]
    not_entitled: int = 0

    def __bool__(self) -> bool:
        return bool(self.grades)


def gold_set(gold: Iterable[str] | Mapping[str, float], not_entitled: Iterable[str] = ()) -> GoldSet:
    """Normalise gold: ids (grade 1) or id -> grade; grades <= 0 dropped; non-entitled ids left out."""
    if isinstance(gold, str):
        raise TypeError("gold is a collection of ids (or id -> grade), not one string")
    items = gold.items() if isinstance(gold, Mapping) else ((doc_id, 1.0) for doc_id in gold)
    barred = set(not_entitled)
    grades: dict[str, float] = {}
    left_out = set()
    for doc_id, grade in items:
        g = float(grade)
        if g <= 0:
            continue
        if doc_id in barred:
            left_out.add(doc_id)
        else:
            grades[doc_id] = max(g, grades.get(doc_id, g))  # an id given twice is one gold document
    return GoldSet(grades, len(left_out))


def ranking(ids: Iterable[str]) -> list[str]:
    """The ranked list as counted: each id at its first place only."""
    return list(dict.fromkeys(ids))


@dataclass(frozen=True)
class RankScores:
    """The metrics of one ranked list: name ('recall@5', 'mrr') -> value."""

    values: Mapping[str, float]

    def __getitem__(self, name: str) -> float:
        return self.values[name]


@dataclass(frozen=True)
class TraceScores:
    """Both stages of one trace. A stage is None when its list was not reported."""

    retrieved: RankScores | None
    context: RankScores | None
    dropped_ids: tuple[str, ...] | None  # gold among the candidates, not in the context; None: unknown
    missed: bool | None  # no gold among the candidates at all; None: candidates unknown
    not_entitled: int = 0

    @property
    def dropped(self) -> bool | None:
        return None if self.dropped_ids is None else bool(self.dropped_ids)


@dataclass(frozen=True)
class Judged:
    """One trace as the batch reads it: its two lists (None: not reported) and its gold."""

    retrieved: Sequence[str] | None
    context: Sequence[str] | None
    gold: GoldSet


def rank_metrics(ids: Sequence[str], gold: GoldSet, ks: Sequence[int] = DEFAULT_KS) -> RankScores | None:
    """One ranked list against gold; None (no data) without gold."""
    scores = trace_metrics(ids, None, gold, ks)
    return None if scores is None else scores.retrieved


def trace_metrics(
    retrieved: Sequence[str] | None,
    context: Sequence[str] | None,
    gold: GoldSet,
    ks: Sequence[int] = DEFAULT_KS,
) -> TraceScores | None:
    """Both stages of one trace and the drop/miss indicators; None (no data) without gold."""
    if not gold:
        return None
    columns = batch_metrics([Judged(retrieved, context, gold)], ks)
    stages: dict[str, RankScores | None] = {}
    for stage, ids in (("retrieved", retrieved), ("context", context)):
        stages[stage] = (
            None
            if ids is None
            else RankScores({name: float(columns[f"{stage}.{name}"][0]) for name in metric_names(ks)})
        )
    dropped = None
    if retrieved is not None and context is not None:
        shown = set(context)
        dropped = tuple(sorted(g for g in set(retrieved) & gold.grades.keys() if g not in shown))
    missed = None if retrieved is None else not (set(retrieved) & gold.grades.keys())
    return TraceScores(stages["retrieved"], stages["context"], dropped, missed, gold.not_entitled)


def _discounts(depth: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))


def batch_metrics(traces: Sequence[Judged], ks: Sequence[int] = DEFAULT_KS) -> dict[str, np.ndarray]:
    """Every column of `column_names(ks)` for many traces at once, NaN where there is no data.

    A row is NaN throughout when the trace has no gold; a stage's columns are
    NaN when its list was not reported; `dropped` (gold among the candidates,
    not in the context: 1.0) needs both lists and `missed` (no gold among the
    candidates: 1.0) the candidates.

    One pass in Python finds each gold id's rank (gold is short, so
    `list.index` per gold id, after removing repeats only where there are
    some); everything after is numpy over (traces x max k) matrices.
    """
    ks = tuple(ks)
    if not ks or min(ks) < 1:
        raise ValueError(f"cut-offs must be positive: {ks}")
    depth = max(ks)
    n = len(traces)
    n_gold = np.zeros(n)
    present = np.zeros((len(STAGES), n), bool)
    rr = np.zeros((len(STAGES), n))
    dropped = np.full(n, np.nan)
    missed = np.full(n, np.nan)
    # sparse (stage, trace, rank - 1, grade) of gold found in the first `depth`, and the ideal gains
    g_stage: list[int] = []
    g_row: list[int] = []
    g_col: list[int] = []
    g_val: list[float] = []
    i_row: list[int] = []
    i_col: list[int] = []
    i_val: list[float] = []
    for i, trace in enumerate(traces):
        gold = trace.gold.grades
        if not gold:
            continue
        n_gold[i] = len(gold)
        top = sorted(gold.values(), reverse=True)[:depth]
        i_row += [i] * len(top)
        i_col += range(len(top))
        i_val += top
        for s, ids in enumerate((trace.retrieved, trace.context)):
            if ids is None:
                continue
            present[s, i] = True
            if len(set(ids)) != len(ids):
                ids = list(dict.fromkeys(ids))  # a repeated id counts at its first place
            first = -1
            for doc_id, grade in gold.items():
                if doc_id in ids:
                    j = ids.index(doc_id)
                    if first < 0 or j < first:
                        first = j
                    if j < depth:
                        g_stage.append(s)
                        g_row.append(i)
                        g_col.append(j)
                        g_val.append(grade)
            if first >= 0:
                rr[s, i] = 1.0 / (first + 1)
        if trace.retrieved is not None:
            among = [doc_id for doc_id in gold if doc_id in trace.retrieved]
            missed[i] = 0.0 if among else 1.0
            if trace.context is not None:
                shown = trace.context
                dropped[i] = 1.0 if any(doc_id not in shown for doc_id in among) else 0.0
    disc = _discounts(depth)
    ideal = np.zeros((n, depth))
    ideal[i_row, i_col] = i_val
    ideal_dcg = np.cumsum(ideal * disc, axis=1)
    gains = np.zeros((len(STAGES), n, depth))
    gains[g_stage, g_row, g_col] = g_val
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for s, stage in enumerate(STAGES):
            found = np.cumsum(gains[s] > 0, axis=1)
            dcg = np.cumsum(gains[s] * disc, axis=1)
            missing = ~present[s]
            at = {k: found[:, k - 1] for k in ks}
            columns = {
                "hit": {k: (at[k] > 0).astype(np.float64) for k in ks},
                "recall": {k: at[k] / n_gold for k in ks},
                "precision": {k: at[k] / k for k in ks},
                "ndcg": {k: dcg[:, k - 1] / ideal_dcg[:, k - 1] for k in ks},
            }
            for metric in RANK_METRICS:
                for k in ks:
                    values = columns[metric][k]
                    values[missing] = np.nan
                    out[f"{stage}.{metric}@{k}"] = values
            stage_rr = rr[s]
            stage_rr[missing] = np.nan
            out[f"{stage}.mrr"] = stage_rr
    out["dropped"] = dropped
    out["missed"] = missed
    return out
