"""Online retrieval metrics of one trace whose gold is known (docs/retrieval-metrics.md).

The metrics are those of service/contracts/ranking.py (Hit, Recall,
Precision, nDCG @k and MRR, equal to trec_eval's), on two ranked lists kept
with the exclusion sample: the sample's candidates in the app's order (stage
`candidates`) and the context given to the generator, retrieval.documents
(stage `context`). Gold at `candidates` but not at `context` is a reranker or
packer drop; gold at neither is a retriever miss.

Only gold from labels counts (label events, or gold ids sent with the
sample): proxy gold is chosen among the candidates by their scores, so its
recall among the candidates would be 1 by construction.

Gold that violates an entitlement predicate is left out of numerator and
denominator, as for the false-exclusion rate (the app must not show it);
such a candidate still occupies its rank as a non-gold document. Gold that
is not among the candidates at all is a miss (recall's whole point), not
left out as the exclusion rate leaves it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from service.contracts.ranking import RankScores, gold_set, trace_metrics
from workers.exclusion.state import StoredSample

STAGES: tuple[str, ...] = ("candidates", "context")
NO_CUTOFF = "all"  # the `k` label of MRR (the first gold id anywhere in the list)


def series_keys(ks: Sequence[int]) -> list[tuple[str, str]]:
    """(metric, k) label pairs of one stage: hit/recall/precision/ndcg at each k, and MRR."""
    return [(m, str(k)) for m in ("hit", "recall", "precision", "ndcg") for k in ks] + [("mrr", NO_CUTOFF)]


def _split(scores: RankScores) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for name, value in scores.values.items():
        metric, _, k = name.partition("@")
        out[(metric, k or NO_CUTOFF)] = value
    return out


def retrieval_values(
    stored: StoredSample, gold_ids: Iterable[str], ks: Sequence[int]
) -> dict[str, dict[tuple[str, str], float]] | None:
    """stage -> (metric, k) -> the trace's value; None (not counted) without entitled gold, or when the
    ranked ids were not kept (an entry of the older layout)."""
    if stored.candidate_ids is None or stored.context_ids is None:
        return None
    gold = gold_set(list(gold_ids), not_entitled=stored.sample.not_entitled)
    scores = trace_metrics(list(stored.candidate_ids), list(stored.context_ids), gold, ks)
    if scores is None or scores.retrieved is None or scores.context is None:
        return None
    return {"candidates": _split(scores.retrieved), "context": _split(scores.context)}
