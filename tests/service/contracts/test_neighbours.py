"""overlap@k, RBO_ext and recall@k against values computed by hand (docs/probes.md, "Definitions")."""

from __future__ import annotations

import pytest

from service.contracts.neighbours import overlap_at_k, ranked, rbo, recall_at_k


def test_overlap_at_k_by_hand() -> None:
    a, b = ["a", "b", "c", "d"], ["a", "c", "e", "f"]
    assert overlap_at_k(a, b, k=4) == 0.5  # {a, c} of 4
    assert overlap_at_k(a, b, k=2) == 0.5  # {a} of {a, b} vs {a, c}
    assert overlap_at_k(a, b, k=1) == 1.0
    assert overlap_at_k(a, b, k=10) == 0.5  # lists of 4: k' = 4, identical short lists overlap fully
    assert overlap_at_k(["a", "b"], ["b", "a"], k=10) == 1.0
    assert overlap_at_k(["a", "b", "c"], ["x"], k=3) == 0.0


def test_overlap_no_data_and_bad_k() -> None:
    assert overlap_at_k([], [], k=5) is None
    assert overlap_at_k(["a"], [], k=5) == 0.0
    with pytest.raises(ValueError, match="k must be at least 1"):
        overlap_at_k(["a"], ["a"], k=0)


def test_rbo_even_lists_by_hand() -> None:
    # X = 1, 1, 3: (0.1/0.9)(1*0.9 + 0.5*0.81 + 1*0.729) + 1*0.729 = 2.034/9 + 0.729 = 0.955
    assert rbo(["a", "b", "c"], ["a", "c", "b"], p=0.9) == pytest.approx(0.955)
    # X = 0, 2: (0.1/0.9)(0 + 1*0.81) + 1*0.81 = 0.09 + 0.81
    assert rbo(["a", "b"], ["b", "a"], p=0.9) == pytest.approx(0.9)
    assert rbo(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    assert rbo(["a", "b"], ["c", "d"]) == 0.0


def test_rbo_uneven_lists_by_hand() -> None:
    # S = [a, b], L = [b, c, a], p = 0.5: X1 = 0, X2 = 1, X3 = 2, X_s = 1.
    # sum X_d/d p^d = 1/8 + 1/12; sum_{d=3} X_s (d-s)/(s d) p^d = 1/48; tail (1/3 + 1/2) / 8 = 5/48
    assert rbo(["a", "b"], ["b", "c", "a"], p=0.5) == pytest.approx(1 / 3)
    assert rbo(["b", "c", "a"], ["a", "b"], p=0.5) == pytest.approx(1 / 3)  # symmetric
    # a prefix of the longer list: extrapolation agrees on everything seen
    assert rbo(["a"], ["a", "b"], p=0.9) == pytest.approx(1.0)


def test_rbo_cut_at_k_repeats_and_no_data() -> None:
    assert rbo(["a", "b", "x"], ["a", "b", "y"], k=2) == pytest.approx(1.0)
    assert ranked(["a", "a", "b", "a", "c"], 2) == ["a", "b"]
    assert rbo(["a", "a", "b"], ["a", "b"]) == pytest.approx(1.0)
    assert rbo([], ["a"]) == 0.0
    assert rbo([], []) is None
    with pytest.raises(ValueError, match="p must be in"):
        rbo(["a"], ["a"], p=1.0)


def test_recall_at_k() -> None:
    assert recall_at_k(["g1", "g2"], ["x", "g2", "g1"], k=2) == 0.5
    assert recall_at_k(["g1", "g2"], ["x", "g2", "g1"], k=3) == 1.0
    assert recall_at_k([], ["x"]) is None
