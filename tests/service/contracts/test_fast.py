"""The API's fast body check never admits what the contract models refuse, and admits what they accept
in the contract's own spelling (simulated traffic)."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from pydantic import ValidationError

from service.contracts import BODY_MODELS
from service.contracts.fast import check_body
from tests.service.contracts.test_views import BROKEN, _sample_body, _simulated

# Values a mutation puts in place of a field: each breaks some rule somewhere.
PALETTE: list[Any] = [
    None,
    "",
    "has space",
    "UPPER",
    "x" * 200,
    "x" * 40_000,
    -1,
    0,
    1,
    1.5,
    1e12,
    -1e12,
    float("nan"),
    float("inf"),
    True,
    False,
    "2025-13-01",
    "2025-01-01",
    [],
    [1, "a"],
    {},
    {"a": 1},
    {"a": {"b": 1}},
    ["a b"],
    list(range(200)),
    "yes",
    "0.5",
]


def _accepted_by_models(event_type: str, body: Any) -> bool:
    try:
        BODY_MODELS[event_type].model_validate(body)
    except ValidationError:
        return False
    return True


def test_simulated_bodies_pass_the_fast_check() -> None:
    for record in _simulated(2000):
        assert check_body(record["type"], record["body"]), record


@pytest.mark.parametrize(("worker", "mutate"), BROKEN)
def test_broken_traces_fail_the_fast_check(worker: str, mutate: Any) -> None:
    body = _sample_body()
    assert check_body("trace", body)
    mutate(body)
    if any(isinstance(v, str) and v.startswith("<a JSON number") for v in _leaves(body)):
        return  # a number beyond the float range exists only in JSON text: the API's parser refuses it first
    assert not check_body("trace", body)


@pytest.mark.parametrize(
    ("event_type", "body"),
    [
        ("trace", {"trace_id": "t", "request_id": "r", "query": {"text": "q"}, "retrieval": None}),
        ("trace", {"trace_id": "t", "request_id": "r", "query": {"text": "q"}, "answer": {"text": None}}),
        ("trace", {"trace_id": "t", "request_id": "r", "query": {"text": "q"}, "usage": {"model": ""}}),
        ("feedback", {"trace_id": "t", "kind": "thumbs", "value": 0.5}),
        ("feedback", {"trace_id": "t", "kind": "dwell", "value": -1}),
        ("feedback", {"trace_id": "t", "kind": "copy", "reason": "bored"}),
        ("label", {"trace_id": "t"}),
        ("label", {"trace_id": "t", "faithful": True, "note": "x" * 5000}),
        # Rules checked after the decode (fast.rules_hold): names, predicate values.
        ("trace", {"trace_id": "t", "request_id": "r", "query": {"text": "q"}, "variant": "Canary"}),
        ("trace", {"trace_id": "t", "request_id": "r", "query": {"text": "q"}, "intent": "two words"}),
        *[
            (
                "trace",
                {
                    "trace_id": "t",
                    "request_id": "r",
                    "query": {"text": "q"},
                    "retrieval": {"filters": {where: [{"field": "f", "op": "eq", "value": "ok"}, predicate]}},
                },
            )
            for where in ("entitlement", "relevance")
            for predicate in (
                {"field": "f", "op": "gt", "value": "not a date"},
                {"field": "f", "op": "lte", "value": "2025-13-01"},
                {"field": "f", "op": "gte", "value": True},
                {"field": "f", "op": "eq"},
                {"field": "f", "op": "neq", "value": [1]},
                {"field": "f", "op": "in", "value": "a"},
                {"field": "f", "op": "not_in", "value": 1},
                {"field": "f", "op": "exists", "value": "yes"},
            )
        ],
        ("release", {"release": "v1", "variant": "UPPER"}),
        ("release", {"release": "v 1"}),
        ("release", {"release": "v1", "extra": 1}),
        ("release", {"release": "v1", "component": "index", "from": "idx-1"}),  # a component names its `to`
        ("release", {"release": "v1", "component": "prompt", "from": "p1", "to": "p1"}),  # no change
        ("release", {"release": "v1", "component": "reranker", "to": "rr 2"}),  # not an identifier
        ("release", {"release": "v1", "component": "tokenizer", "to": "t2"}),
    ],
)
def test_broken_bodies_of_every_type_fail_both(event_type: str, body: dict[str, Any]) -> None:
    assert not _accepted_by_models(event_type, body)
    assert not check_body(event_type, body)


def _leaves(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [leaf for v in node.values() for leaf in _leaves(v)]
    if isinstance(node, list):
        return [leaf for v in node for leaf in _leaves(v)]
    return [node]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:3]):
            out += _paths(v, (*prefix, i))
    return out


def _replace(body: Any, path: tuple[Any, ...], value: Any) -> None:
    node = body
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def test_the_fast_check_never_admits_what_the_models_refuse() -> None:
    """Random single-field mutations of simulated bodies: fast check passes => the models accept."""
    rng = random.Random(13)
    records = [r for r in _simulated(600) if r["type"] in BODY_MODELS]
    admitted = refused = 0
    for record in records:
        for _ in range(6):
            body = copy.deepcopy(record["body"])
            path = rng.choice(_paths(body))
            _replace(body, path, copy.deepcopy(rng.choice(PALETTE)))
            if check_body(record["type"], body):
                admitted += 1
                assert _accepted_by_models(record["type"], body), (record["type"], path, body)
            else:
                refused += 1
    assert admitted > 100 and refused > 1000  # both sides of the property were exercised


@pytest.mark.parametrize(
    "predicate",
    [
        {"field": "f", "op": "gt", "value": 3},
        {"field": "f", "op": "gte", "value": "2025-01-01"},
        {"field": "f", "op": "lt", "value": "2025-01-01T10:00:00Z"},
        {"field": "f", "op": "eq", "value": False},
        {"field": "f", "op": "in", "value": []},
        {"field": "f", "op": "exists"},
        {"field": "f", "op": "exists", "value": False},
    ],
)
def test_predicates_the_models_accept_pass_the_fast_check(predicate: dict[str, Any]) -> None:
    body = {
        "trace_id": "t",
        "request_id": "r",
        "query": {"text": "q"},
        "variant": "canary-2",
        "intent": "billing",
        "retrieval": {"filters": {"relevance": [predicate]}},
    }
    assert _accepted_by_models("trace", body)
    assert check_body("trace", body)
