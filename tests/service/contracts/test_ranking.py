"""Every retrieval metric against hand-computed values, and equal to trec_eval's (pytrec-eval-terrier)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from service.contracts.ranking import (
    Judged,
    batch_metrics,
    column_names,
    gold_set,
    metric_names,
    parse_ks,
    rank_metrics,
    ranking,
    trace_metrics,
)


def _d(rank: int) -> float:
    return 1 / math.log2(rank + 1)


def test_binary_gold_hand_computed() -> None:
    # gold a, b; list x a y b: a at rank 2, b at rank 4
    s = rank_metrics(["x", "a", "y", "b"], gold_set(["a", "b"]))
    assert s is not None
    assert [s[f"hit@{k}"] for k in (1, 3, 5, 10)] == [0, 1, 1, 1]
    assert [s[f"recall@{k}"] for k in (1, 3, 5, 10)] == [0, 0.5, 1, 1]
    assert s["precision@1"] == 0
    assert s["precision@3"] == pytest.approx(1 / 3)
    assert s["precision@5"] == pytest.approx(2 / 5)
    assert s["precision@10"] == pytest.approx(2 / 10)  # k larger than the list: divided by k
    ideal = {1: 1.0, 3: 1 + _d(2), 5: 1 + _d(2), 10: 1 + _d(2)}
    assert s["ndcg@1"] == 0
    assert s["ndcg@3"] == pytest.approx(_d(2) / ideal[3])
    assert s["ndcg@5"] == pytest.approx((_d(2) + _d(4)) / ideal[5])
    assert s["ndcg@10"] == pytest.approx((_d(2) + _d(4)) / ideal[10])
    assert s["mrr"] == 0.5


def test_graded_ndcg_hand_computed() -> None:
    # gold grades a=3, b=1, c=2; list b c x a
    s = rank_metrics(["b", "c", "x", "a"], gold_set({"a": 3, "b": 1, "c": 2}))
    assert s is not None
    dcg3 = 1 * _d(1) + 2 * _d(2)
    idcg3 = 3 * _d(1) + 2 * _d(2) + 1 * _d(3)
    assert s["ndcg@3"] == pytest.approx(dcg3 / idcg3)
    assert s["ndcg@1"] == pytest.approx(1 / 3)
    assert s["ndcg@5"] == pytest.approx((dcg3 + 3 * _d(4)) / idcg3)
    # relevance ignores grades for the other metrics
    assert s["recall@3"] == pytest.approx(2 / 3)
    assert s["precision@3"] == pytest.approx(2 / 3)
    assert s["mrr"] == 1.0


def test_grade_zero_is_not_gold_and_repeats_keep_the_highest_grade() -> None:
    g = gold_set({"a": 0, "b": 2})
    assert dict(g.grades) == {"b": 2.0}
    s = rank_metrics(["a", "b"], g)
    assert s is not None and s["precision@1"] == 0 and s["mrr"] == 0.5
    assert dict(gold_set({"a": 1.5}).grades) == {"a": 1.5}  # a fractional grade is relevant
    assert dict(gold_set(["a", "a", "b"]).grades) == {"a": 1.0, "b": 1.0}


def test_ties_in_grade_give_the_same_ideal() -> None:
    # two gold of equal grade: either order is ideal
    g = gold_set({"a": 2, "b": 2})
    first = rank_metrics(["a", "b"], g)
    second = rank_metrics(["b", "a"], g)
    assert first is not None and second is not None
    assert first["ndcg@3"] == pytest.approx(1.0)
    assert first.values == second.values


def test_duplicate_ids_count_at_their_first_place() -> None:
    assert ranking(["x", "x", "a", "x", "b"]) == ["x", "a", "b"]
    s = rank_metrics(["x", "x", "a", "a", "b"], gold_set(["a", "b"]))
    assert s is not None
    # ranked x a b: a at 2, b at 3 (the copies do not take places)
    assert s["mrr"] == 0.5
    assert s["recall@3"] == 1.0
    assert s["precision@3"] == pytest.approx(2 / 3)
    # a repeated gold id is one hit, not two
    s2 = rank_metrics(["a", "a", "a"], gold_set(["a", "b"]))
    assert s2 is not None and s2["recall@3"] == 0.5 and s2["precision@3"] == pytest.approx(1 / 3)


def test_no_gold_is_no_data_never_zero() -> None:
    assert rank_metrics(["a", "b"], gold_set([])) is None
    assert trace_metrics(["a"], ["a"], gold_set({"a": 0})) is None
    # gold that is all not entitled leaves no gold
    assert trace_metrics(["a"], ["a"], gold_set(["z"], not_entitled=["z"])) is None
    cols = batch_metrics([Judged(["a"], ["a"], gold_set([]))])
    assert all(np.isnan(cols[name][0]) for name in column_names())


def test_empty_list_with_gold_is_a_total_miss() -> None:
    s = trace_metrics([], [], gold_set(["a"]))
    assert s is not None and s.retrieved is not None and s.context is not None
    assert all(v == 0 for v in s.retrieved.values.values())
    assert s.missed is True and s.dropped is False


def test_k_larger_than_the_list() -> None:
    s = rank_metrics(["a"], gold_set(["a"]), ks=(1, 20))
    assert s is not None
    assert s["precision@20"] == pytest.approx(1 / 20)
    assert s["recall@20"] == 1.0 and s["ndcg@20"] == 1.0 and s["hit@20"] == 1.0


def test_unreported_list_is_no_data_and_stages_tell_a_drop_from_a_miss() -> None:
    g = gold_set(["a", "b"])
    # a retrieved at 3, dropped by the packer; b never retrieved
    s = trace_metrics(["x", "y", "a"], ["x", "y"], g)
    assert s is not None and s.retrieved is not None and s.context is not None
    assert s.retrieved["recall@3"] == 0.5 and s.context["recall@3"] == 0.0
    assert s.dropped_ids == ("a",) and s.dropped is True and s.missed is False
    miss = trace_metrics(["x"], ["x"], g)
    assert miss is not None and miss.dropped is False and miss.missed is True
    only_context = trace_metrics(None, ["a"], g)
    assert only_context is not None and only_context.retrieved is None
    assert only_context.dropped is None and only_context.missed is None
    cols = batch_metrics([Judged(None, ["a"], g)])
    assert np.isnan(cols["retrieved.recall@5"][0]) and cols["context.recall@5"][0] == 0.5
    assert np.isnan(cols["dropped"][0]) and np.isnan(cols["missed"][0])


def test_not_entitled_gold_is_out_of_numerator_and_denominator() -> None:
    g = gold_set(["a", "z"], not_entitled=["z"])
    assert dict(g.grades) == {"a": 1.0} and g.not_entitled == 1
    # z was returned (a leak): it holds rank 1 as a non-gold document
    s = trace_metrics(["z", "a"], ["z", "a"], g)
    assert s is not None and s.retrieved is not None
    assert s.retrieved["recall@1"] == 0 and s.retrieved["recall@3"] == 1.0 and s.retrieved["mrr"] == 0.5
    assert s.not_entitled == 1 and s.dropped is False


def test_parse_ks() -> None:
    assert parse_ks("10,1, 3,3") == (1, 3, 10)
    for bad in ("", "0", "a", "-1,2"):
        with pytest.raises(ValueError):
            parse_ks(bad)
    assert metric_names((2,)) == ["hit@2", "recall@2", "precision@2", "ndcg@2", "mrr"]
    with pytest.raises(ValueError):
        batch_metrics([], (0, 3))
    with pytest.raises(TypeError):
        gold_set("abc")


def test_gold_in_the_context_but_not_among_the_candidates() -> None:
    s = trace_metrics(["x"], ["g"], gold_set(["g"]))
    assert s is not None and s.context is not None and s.retrieved is not None
    assert s.context["hit@1"] == 1 and s.retrieved["hit@10"] == 0
    assert s.missed is True and s.dropped is False


MEASURES = {"P.1,3,5,10", "recall.1,3,5,10", "ndcg_cut.1,3,5,10", "recip_rank", "success.1,3,5,10"}
TREC_NAME = {"hit": "success", "recall": "recall", "precision": "P", "ndcg": "ndcg_cut"}


def _random_runs(seed: int, n: int) -> list[tuple[list[str], dict[str, int]]]:
    rnd = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(30)]
    out = []
    for _ in range(n):
        ranked = [rnd.choice(docs) for _ in range(rnd.randint(1, 15))]  # repeats included
        gold_ids = rnd.sample(docs, rnd.randint(1, 5))
        graded = rnd.random() < 0.5
        out.append((ranked, {d: (rnd.randint(1, 3) if graded else 1) for d in gold_ids}))
    return out


def test_equal_to_trec_eval_on_random_runs() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    runs = _random_runs(7, 400)
    qrel = {f"q{i}": gold for i, (_, gold) in enumerate(runs)}
    # trec_eval ranks by score and breaks ties by document id: strictly decreasing scores in list order
    run = {
        f"q{i}": {doc: float(1000 - j) for j, doc in enumerate(ranking(ranked))}
        for i, (ranked, _) in enumerate(runs)
    }
    theirs = pytrec_eval.RelevanceEvaluator(qrel, MEASURES).evaluate(run)
    ks = (1, 3, 5, 10)
    cols = batch_metrics([Judged(ranked, None, gold_set(gold)) for ranked, gold in runs], ks)
    worst = 0.0
    for i in range(len(runs)):
        mine = rank_metrics(runs[i][0], gold_set(runs[i][1]), ks)
        assert mine is not None
        for name in metric_names(ks):
            metric, _, k = name.partition("@")
            ref = theirs[f"q{i}"]["recip_rank" if metric == "mrr" else f"{TREC_NAME[metric]}_{k}"]
            assert mine[name] == pytest.approx(ref, abs=1e-12), (i, name)
            assert cols[f"retrieved.{name}"][i] == mine[name]
            worst = max(worst, abs(mine[name] - ref))
    assert worst < 1e-12


def test_context_stage_equals_trec_eval_and_the_batch_equals_one_trace_at_a_time() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rnd = random.Random(11)
    runs = _random_runs(12, 300)
    contexts = [rnd.sample(ranking(r), min(len(ranking(r)), rnd.randint(1, 5))) + ["extra"] for r, _ in runs]
    qrel = {f"q{i}": gold for i, (_, gold) in enumerate(runs)}
    run = {f"q{i}": {d: float(100 - j) for j, d in enumerate(c)} for i, c in enumerate(contexts)}
    theirs = pytrec_eval.RelevanceEvaluator(qrel, MEASURES).evaluate(run)
    judged = [Judged(r, c, gold_set(g)) for (r, g), c in zip(runs, contexts, strict=True)]
    cols = batch_metrics(judged)
    drops = 0
    for i, j in enumerate(judged):
        one = trace_metrics(j.retrieved, j.context, j.gold)
        assert one is not None and one.context is not None
        for name in metric_names():
            metric, _, k = name.partition("@")
            ref = theirs[f"q{i}"]["recip_rank" if metric == "mrr" else f"{TREC_NAME[metric]}_{k}"]
            assert one.context[name] == pytest.approx(ref, abs=1e-12)
            assert cols[f"context.{name}"][i] == one.context[name]
        assert cols["dropped"][i] == float(bool(one.dropped))
        assert cols["missed"][i] == float(bool(one.missed))
        drops += bool(one.dropped)
    assert 0 < drops < len(judged)  # both cases occur
