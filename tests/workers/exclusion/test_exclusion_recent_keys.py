"""The exclusion worker's memory of counted claims: bounded in entries and in bytes, oldest forgotten first."""

from __future__ import annotations

import random
import tracemalloc
from collections import OrderedDict

import pytest

from workers.exclusion import processor
from workers.exclusion.processor import RecentKeys


def test_remembers_the_newest_limit_keys_and_forgets_the_oldest() -> None:
    recent = RecentKeys(1000)
    keys = [f"ragmon:exclusion:evaluated:acme:trace-{i}" for i in range(5000)]
    for key in keys:
        recent.add(key)
    assert len(recent) == 1000
    assert all(key in recent for key in keys[-1000:])
    assert not any(key in recent for key in keys[:4000])


def test_adding_a_remembered_key_again_changes_nothing() -> None:
    recent = RecentKeys(3)
    for key in ("a", "b", "c", "a"):
        recent.add(key)
    assert len(recent) == 3
    recent.add("d")  # forgets the oldest, "a": its second add did not make it newer
    assert [k in recent for k in ("a", "b", "c", "d")] == [False, True, True, True]


def test_agrees_with_an_ordered_dict_under_churn() -> None:
    # A small table wraps around and its clusters are shifted on removal many times over.
    rng = random.Random(7)
    recent, model = RecentKeys(64), OrderedDict[str, None]()
    universe = [f"k{i}" for i in range(400)]
    for _ in range(20_000):
        key = rng.choice(universe)
        assert (key in recent) == (key in model), key
        if key not in model:
            model[key] = None
            if len(model) > 64:
                model.popitem(last=False)
        recent.add(key)
        assert len(recent) == len(model)
    assert all((key in recent) == (key in model) for key in universe)


def test_bytes_are_fixed_at_construction_and_do_not_grow_with_keys() -> None:
    recent = RecentKeys(10_000)
    assert recent.nbytes == 8 * (16_384 * 2 + 10_000)  # table: the power of two at least twice the limit
    # Only what the processor's own code holds: threads other tests left running allocate too.
    own = [tracemalloc.Filter(True, processor.__file__)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(own)
        for i in range(50_000):  # five times the limit, keys of 60-odd characters
            recent.add(f"ragmon:exclusion:labelled:tenant-{i % 7}:trace-{i:012d}-{i * 7919}")
        after = tracemalloc.take_snapshot().filter_traces(own)
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert len(recent) == 10_000
    assert grown < 4096, f"{grown} bytes held after 50,000 keys"


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="recent_limit"):
        RecentKeys(0)
