"""Sampling is a function of the request id; the pairs budget decides once per request."""

from __future__ import annotations

import math

from workers.faithfulness.sampling import PairBudget, sample_point, sampled


def test_the_sample_point_is_fixed_by_tenant_and_request() -> None:
    assert sample_point("acme", "req-1") == sample_point("acme", "req-1")
    assert sample_point("acme", "req-1") != sample_point("acme", "req-2")
    assert sample_point("acme", "req-1") != sample_point("globex", "req-1")
    assert 0.0 <= sample_point("acme", "req-1") < 1.0


def test_the_rate_is_the_share_of_requests_sampled() -> None:
    ids = [f"req-{i}" for i in range(20_000)]
    for rate in (0.02, 0.1, 0.5):
        share = sum(sampled("acme", rid, rate) for rid in ids) / len(ids)
        sigma = math.sqrt(rate * (1 - rate) / len(ids))
        assert abs(share - rate) < 5 * sigma
    assert not any(sampled("acme", rid, 0.0) for rid in ids[:1000])
    assert all(sampled("acme", rid, 1.0) for rid in ids[:1000])


def test_a_lower_rate_samples_a_subset_of_a_higher_one() -> None:
    # Raising the rate adds requests without dropping any: dashboards stay continuous.
    ids = [f"req-{i}" for i in range(2000)]
    low = {rid for rid in ids if sampled("acme", rid, 0.05)}
    high = {rid for rid in ids if sampled("acme", rid, 0.2)}
    assert low and low < high


def test_the_budget_admits_a_burst_then_refills_with_time() -> None:
    budget = PairBudget(pairs_per_second=2, burst_seconds=2, now=0.0)  # 4 pairs banked
    assert [budget.admit("acme", f"r{i}", 1, now=0.0) for i in range(5)] == [True] * 4 + [False]
    assert budget.admit("acme", "r5", 1, now=0.4) is False  # 0.8 pair refilled: not yet one
    assert budget.admit("acme", "r6", 1, now=0.6) is True
    assert budget.admit("acme", "r7", 3, now=1.0) is False  # 0.8 banked: 3 pairs do not fit


def test_a_twin_gets_the_decision_of_its_request() -> None:
    budget = PairBudget(pairs_per_second=1, burst_seconds=1, now=0.0)
    assert budget.admit("acme", "admitted", 1, now=0.0)
    assert not budget.admit("acme", "refused", 1, now=0.0)
    # The bucket is empty, yet the admitted request's shadow twin is scored too ...
    assert budget.admit("acme", "admitted", 1, now=0.1)
    # ... and the refused one's twin is not, even once the bucket has refilled.
    assert not budget.admit("acme", "refused", 1, now=50.0)
    assert budget.tokens == 1.0


def test_a_request_larger_than_the_bucket_runs_when_the_bucket_is_full() -> None:
    budget = PairBudget(pairs_per_second=1, burst_seconds=3, now=0.0)
    assert budget.admit("acme", "ten-sentences", 10, now=0.0)
    assert not budget.admit("acme", "next", 1, now=1.0)  # the overdraft is paid back first
    assert budget.tokens == -2.0


def test_remembered_decisions_are_bounded() -> None:
    budget = PairBudget(pairs_per_second=1, burst_seconds=1, now=0.0, memory=2)
    budget.admit("acme", "a", 1, now=0.0)  # admitted, the bucket is now empty
    budget.admit("acme", "b", 1, now=0.0)  # refused
    budget.admit("acme", "c", 1, now=0.0)  # refused; "a" is forgotten
    assert not budget.admit("acme", "a", 1, now=0.5)  # decided afresh: half a pair banked


def test_a_tenant_flooding_sampled_requests_takes_only_its_share_of_the_budget() -> None:
    """The budget is one per worker, for every tenant. A tenant sending 100 sampled requests a second (it
    picks request ids that fall in the sample) took the whole bucket: a tenant asking for one a second got
    0 of 300 scored (now 299). Each tenant asking within burst_seconds has an equal share of its own, and
    may go beyond it only while the bucket holds half its capacity besides."""
    budget = PairBudget(pairs_per_second=2, burst_seconds=30, now=0.0)
    admitted = {"mallory": 0, "acme": 0}
    for second in range(300):
        now = float(second)
        for i in range(100):
            admitted["mallory"] += budget.admit("mallory", f"m{second}-{i}", 1, now)
        admitted["acme"] += budget.admit("acme", f"a{second}", 1, now)
    assert admitted["acme"] >= 290
    assert admitted["mallory"] >= 300  # its half, and what acme left of the bank
    assert sum(admitted.values()) <= 2 * 300 + 60 + 1  # the budget itself is unchanged


def test_a_lone_tenant_has_the_whole_budget_and_an_idle_ones_share_returns() -> None:
    budget = PairBudget(pairs_per_second=1, burst_seconds=10, now=0.0)
    assert sum(budget.admit("acme", f"a{i}", 1, now=0.0) for i in range(20)) == 10
    assert budget.admit("globex", "g0", 1, now=0.0) is False  # the bucket is empty for everyone
    # globex asked at 0 and never again: after burst_seconds acme is alone with the whole refill again.
    assert sum(budget.admit("acme", f"b{i}", 1, now=30.0) for i in range(20)) == 10


def test_a_tenant_pays_for_every_pair_of_a_request_larger_than_the_bucket() -> None:
    """In sentences mode an answer of 8,192 sentences is 8,192 pairs, within the contract. A request larger
    than the bucket runs once the bucket is full, and the overdraft was capped at one bucket: a tenant asking
    for 1,000 pairs every second had 7,000 pairs scored in 600 s, 5.6x the worker's whole budget (1,260), and a
    tenant asking for one a second 383 of 600. Its share now carries the whole debt, paid back at its rate
    before it is admitted again: 1,000 pairs, and 569 of 600."""
    budget = PairBudget(pairs_per_second=2, burst_seconds=30, now=0.0)
    pairs = {"mallory": 0, "acme": 0}
    for second in range(600):
        now = float(second)
        pairs["mallory"] += 1000 * budget.admit("mallory", f"m{second}", 1000, now)
        pairs["acme"] += budget.admit("acme", f"a{second}", 1, now)
    assert pairs["mallory"] <= 1000 + 60
    assert pairs["acme"] >= 565  # all but the first 30 s, while the worker's bucket paid its one-bucket debt
    # Quiet past burst_seconds with a debt: the debt is kept, not forgiven.
    assert not budget.admit("mallory", "after-a-pause", 1, now=640.0)
