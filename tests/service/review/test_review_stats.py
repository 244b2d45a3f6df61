"""Agreement statistics: seed example exactly, intervals against a bootstrap reference."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from service.review.calibrate import Scored, calibrate, in_selection_half
from service.review.stats import (
    Confusion,
    auc,
    balanced_accuracy,
    cohen_kappa,
    prediction_powered_rate,
    roc,
    youden_threshold,
)


def test_kappa_worked_example_exactly() -> None:
    # 50 cases: both pass 28, both fail 16, judge pass/person fail 3, judge fail/person pass 3.
    k = cohen_kappa(Confusion(both_pass=28, a_pass_b_fail=3, a_fail_b_pass=3, both_fail=16))
    assert k is not None and k.kappa is not None and k.interval is not None
    assert k.n == 50
    assert k.observed == pytest.approx(0.88)
    assert k.chance == pytest.approx(0.62 * 0.62 + 0.38 * 0.38)
    assert round(k.chance, 3) == 0.529
    assert round(k.kappa, 3) == 0.745
    assert k.interval.low < 0.745 < k.interval.high
    assert k.interval.width > 0.3  # 50 cases: a wide interval, as the example warns


def test_kappa_edge_cases() -> None:
    assert cohen_kappa(Confusion(0, 0, 0, 0)) is None
    constant = cohen_kappa(Confusion(10, 0, 0, 0))
    assert constant is not None and constant.kappa is None  # both always pass: chance agreement is 1
    perfect = cohen_kappa(Confusion(10, 0, 0, 10))
    assert perfect is not None and perfect.kappa == pytest.approx(1.0)


def _labels(rng: random.Random, n: int, agree: float) -> tuple[list[bool], list[bool]]:
    a = [rng.random() < 0.7 for _ in range(n)]
    b = [x if rng.random() < agree else (rng.random() < 0.5) for x in a]
    return a, b


def _bootstrap_interval(
    stat, a: list[bool], b: list[bool], reps: int = 2000, seed: int = 7
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    arr_a, arr_b = np.array(a), np.array(b)
    values = []
    for _ in range(reps):
        idx = rng.integers(0, len(a), len(a))
        v = stat(list(arr_a[idx]), list(arr_b[idx]))
        if v is not None:
            values.append(v)
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


@pytest.mark.parametrize("agree", [0.6, 0.85])
def test_kappa_interval_matches_bootstrap(agree: float) -> None:
    a, b = _labels(random.Random(int(agree * 100)), 600, agree)
    k = cohen_kappa(Confusion.of(a, b))
    assert k is not None and k.interval is not None
    low, high = _bootstrap_interval(lambda x, y: cohen_kappa(Confusion.of(x, y)).kappa, a, b)  # type: ignore[union-attr]
    assert k.interval.low == pytest.approx(low, abs=0.02)
    assert k.interval.high == pytest.approx(high, abs=0.02)


def test_balanced_accuracy_interval_matches_bootstrap() -> None:
    truth, predicted = _labels(random.Random(3), 800, 0.8)
    ba = balanced_accuracy(truth, predicted)
    assert ba.value is not None and ba.interval is not None
    low, high = _bootstrap_interval(lambda t, p: balanced_accuracy(t, p).value, truth, predicted)
    assert ba.interval.low == pytest.approx(low, abs=0.015)
    assert ba.interval.high == pytest.approx(high, abs=0.015)
    assert balanced_accuracy([True, True], [True, False]).value is None  # one class only: no data


def test_roc_youden_is_balanced_accuracy_maximum() -> None:
    rng = random.Random(11)
    truth = [rng.random() < 0.6 for _ in range(300)]
    scores = [min(1.0, max(0.0, rng.gauss(0.7 if t else 0.35, 0.15))) for t in truth]
    points = roc(scores, truth)
    best = youden_threshold(scores, truth)
    assert best is not None
    ba_at = {t: balanced_accuracy(truth, [s >= t for s in scores]).value for t in set(scores)}
    assert ba_at[best] == pytest.approx(max(v for v in ba_at.values() if v is not None))
    assert (points[-1].tpr, points[-1].fpr) == (1.0, 1.0)
    area = auc(points)
    assert area is not None and 0.8 < area < 1.0
    assert roc([0.1, 0.2], [True, True]) == []


def _judge_items(n: int, separation: float, seed: int) -> list[Scored]:
    rng = random.Random(seed)
    items = []
    for i in range(n):
        human = rng.random() < 0.7
        score = min(1.0, max(0.0, rng.gauss(0.5 + separation if human else 0.5 - separation, 0.15)))
        items.append(Scored(f"trace-{seed}-{i}", score, human))
    return items


def test_calibration_chooses_on_one_half_and_reports_the_other() -> None:
    items = _judge_items(1200, 0.2, 1)
    report = calibrate("faithfulness", items, configured_threshold=0.5)
    assert report.n_selection + report.n_heldout == 1200
    assert 500 < report.n_selection < 700
    assert report.verdict == "suggest" and report.suggested is not None and report.configured is not None
    assert (
        report.suggested.balanced_accuracy.n_positive + report.suggested.balanced_accuracy.n_negative
        == report.n_heldout
    )
    assert 0.4 < report.suggested.threshold < 0.6
    assert report.configured.threshold == 0.5
    assert report.as_dict()["roc"][0]["threshold"] is None  # +inf is not JSON
    assert all(in_selection_half(s.item) == in_selection_half(s.item) for s in items[:5])


def test_calibration_says_label_more_when_the_interval_is_wide() -> None:
    report = calibrate("faithfulness", _judge_items(40, 0.2, 2), configured_threshold=0.5)
    assert report.verdict == "label_more"
    assert report.message.startswith("label more")
    one_class = calibrate("faithfulness", [Scored(f"t{i}", 0.9, True) for i in range(50)], 0.5)
    assert one_class.verdict == "label_more" and one_class.suggested is None


def test_prediction_powered_rate_removes_judge_bias() -> None:
    rng = np.random.default_rng(5)
    big_n, true_rate = 20000, 0.8
    human = rng.random(big_n) < true_rate
    # A judge that passes 10% of unfaithful answers and fails 15% of faithful ones: biased raw rate.
    judge = np.where(human, rng.random(big_n) > 0.15, rng.random(big_n) < 0.10)
    labelled_idx = rng.choice(big_n, 600, replace=False)
    est = prediction_powered_rate(
        big_n, int(judge.sum()), [(bool(human[i]), bool(judge[i])) for i in labelled_idx]
    )
    raw = judge.mean()
    assert est.value is not None and est.interval is not None
    assert abs(raw - true_rate) > 0.1
    assert est.interval.low <= human.mean() <= est.interval.high
    assert est.interval.width < 0.1
    assert prediction_powered_rate(0, 0, []).value is None
    assert math.isclose(prediction_powered_rate(10, 5, [(True, True), (False, False)]).value or 0, 0.5)


def test_weighted_rate_undoes_oversampling() -> None:
    from service.review.stats import weighted_rate

    rng = random.Random(9)
    population = [rng.random() < 0.85 for _ in range(100_000)]  # 85% faithful
    # Unfaithful answers draw thumbs-down: they are reviewed at 20%, the rest at 1%.
    sample = [(y, 0.01 if y else 0.2) for y in population if rng.random() < (0.01 if y else 0.2)]
    naive = sum(y for y, _ in sample) / len(sample)
    est = weighted_rate(sample)
    assert est.value is not None and est.interval is not None
    assert naive < 0.3  # the reviewed mix is mostly the oversampled failures
    assert est.interval.low <= sum(population) / len(population) <= est.interval.high
    assert est.interval.width < 0.05
    assert weighted_rate([(True, 0.5)]).value is None


# -- re-weighted to the population --------------------------------------------------------------------------


def test_weighted_figures_equal_the_plain_ones_on_replicated_items() -> None:
    """Reference: an item of weight k is k identical items, so integer weights must give the plain
    statistics (direct computation, stats.cohen_kappa / balanced_accuracy) of the expanded list."""
    from service.review.stats import weighted_balanced_accuracy, weighted_kappa, weighted_share

    rng = random.Random(11)
    truth = [rng.random() < 0.6 for _ in range(400)]
    judge = [t if rng.random() < 0.8 else not t for t in truth]
    weights = [rng.choice([1, 2, 5, 20]) for _ in truth]
    big_t = [t for t, w in zip(truth, weights, strict=True) for _ in range(w)]
    big_j = [j for j, w in zip(judge, weights, strict=True) for _ in range(w)]
    kappa = cohen_kappa(Confusion.of(big_t, big_j))
    assert kappa is not None and kappa.kappa is not None
    assert weighted_kappa(truth, judge, weights).value == pytest.approx(kappa.kappa, abs=1e-12)
    plain_ba = balanced_accuracy(big_t, big_j).value
    assert weighted_balanced_accuracy(truth, judge, weights).value == pytest.approx(plain_ba, abs=1e-12)
    assert weighted_share(truth, weights).value == pytest.approx(sum(big_t) / len(big_t), abs=1e-12)
    # Kish's effective n, and equal weights leave the plain figure (with a bootstrap interval near the
    # normal one).
    assert weighted_kappa(truth, judge, weights).effective_n == pytest.approx(
        sum(weights) ** 2 / sum(w * w for w in weights)
    )
    same = weighted_kappa(truth, judge, [3.0] * len(truth))
    plain = cohen_kappa(Confusion.of(truth, judge))
    assert plain is not None and plain.interval is not None and same.interval is not None
    assert same.value == pytest.approx(plain.kappa)
    assert same.interval.low == pytest.approx(plain.interval.low, abs=0.03)
    assert same.interval.high == pytest.approx(plain.interval.high, abs=0.03)


def _stratified_review(rng: np.random.Generator, population: dict[str, np.ndarray]) -> tuple[list[bool], ...]:
    """Review a stratified sample: low-confidence traces (where the judge errs most) at 30%, the rest at 1%."""
    low = population["low"]
    pi = np.where(low, 0.3, 0.01)
    take = rng.random(len(pi)) < pi
    return (
        list(population["human"][take]),
        list(population["judge"][take]),
        list(1.0 / pi[take]),
        ["low_confidence" if x else "blind" for x in low[take]],
    )


def test_weighted_figures_recover_the_population_and_the_plain_ones_do_not() -> None:
    from service.review.stats import weighted_balanced_accuracy, weighted_kappa

    rng = np.random.default_rng(5)
    n = 60_000
    human = rng.random(n) < 0.8
    low = rng.random(n) < 0.1  # one trace in ten scores near the threshold
    wrong = rng.random(n) < np.where(low, 0.45, 0.05)  # there the judge is close to a coin
    judge = np.where(wrong, ~human, human)
    population = {"human": human, "judge": judge, "low": low}
    true_kappa = cohen_kappa(Confusion.of(list(human), list(judge)))
    true_ba = balanced_accuracy(list(human), list(judge)).value
    assert true_kappa is not None and true_kappa.kappa is not None and true_ba is not None
    covered = {"kappa": 0, "ba": 0}
    plain_kappas = []
    runs = 30
    for _ in range(runs):
        h, j, w, s = _stratified_review(rng, population)
        wk = weighted_kappa(h, j, w, s, replicates=400)
        wb = weighted_balanced_accuracy(h, j, w, s, replicates=400)
        assert wk.interval is not None and wb.interval is not None
        covered["kappa"] += wk.interval.low <= true_kappa.kappa <= wk.interval.high
        covered["ba"] += wb.interval.low <= true_ba <= wb.interval.high
        plain = cohen_kappa(Confusion.of(h, j))
        assert plain is not None and plain.kappa is not None
        plain_kappas.append(plain.kappa)
    assert covered["kappa"] >= 0.8 * runs and covered["ba"] >= 0.8 * runs, covered
    # The reviewed mix is mostly the hard traces: its kappa is far below production's.
    assert float(np.median(plain_kappas)) < true_kappa.kappa - 0.2


def test_weighted_figures_refuse_bad_weights_and_say_no_data() -> None:
    from service.review.stats import weighted_balanced_accuracy, weighted_kappa

    with pytest.raises(ValueError, match="weights must be positive"):
        weighted_kappa([True, False], [True, True], [1.0, 0.0])
    with pytest.raises(ValueError, match="one entry per item"):
        weighted_kappa([True, False], [True], [1.0, 1.0])
    assert weighted_kappa([], [], []).value is None
    one_class = weighted_balanced_accuracy([True, True, True], [True, False, True], [1.0, 2.0, 3.0])
    assert one_class.value is None and one_class.interval is None  # no failing item: no TNR, "no data"
