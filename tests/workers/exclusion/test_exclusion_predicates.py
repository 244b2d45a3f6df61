"""Predicate semantics: every operator, numbers, dates, lists, types and missing fields."""

from __future__ import annotations

from typing import Any

import pytest

from service.contracts import Predicate
from workers.exclusion.entitlement import ENTITLED, LEAK, UNVERIFIED, count_verdicts, entitlement_verdict
from workers.exclusion.predicates import compile_predicate, compile_predicates
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import InvalidEvent


def matches(op: str, value: Any, metadata: dict[str, Any], field: str = "f") -> bool:
    return compile_predicate(
        Predicate.model_validate({"field": field, "op": op, "value": value}), "p"
    ).matches(metadata)


@pytest.mark.parametrize(
    ("op", "value", "field_value", "expected"),
    [
        ("eq", "en-US", "en-US", True),
        ("eq", "en-US", "en-GB", False),
        ("eq", 3, 3.0, True),  # numbers compare as numbers
        ("eq", 1, True, False),  # a bool is not the number 1
        ("eq", True, 1, False),
        ("eq", True, True, True),
        ("eq", "5", 5, False),  # a string is not a number
        ("eq", "x", ["a", "x"], True),  # a list field matches when any element does
        ("neq", "en-US", "en-GB", True),
        ("neq", "en-US", "en-US", False),
        ("neq", "x", ["a", "x"], False),
        ("in", ["a", "b"], "b", True),
        ("in", ["a", "b"], "c", False),
        ("in", [1, 2], 2.0, True),
        ("in", [1, "a"], True, False),
        ("in", ["a", "b"], ["z", "a"], True),
        ("not_in", ["a", "b"], "c", True),
        ("not_in", ["a", "b"], "a", False),
        ("not_in", ["a"], ["z", "a"], False),
        ("gt", 5, 6, True),
        ("gt", 5, 5, False),
        ("gte", 5, 5, True),
        ("lt", 5, 4.5, True),
        ("lt", 5, 5, False),
        ("lte", 5, 5, True),
        ("gt", 5, "6", False),  # a numeric string is not a number
        ("gt", 0, True, False),  # nor is a bool
        ("gt", 5, [1, 9], True),
        ("lt", 5, [7, 9], False),
        ("exists", None, "x", True),
        ("exists", True, 0, True),
        ("exists", False, "x", False),
    ],
)
def test_operator_on_present_field(op: str, value: Any, field_value: Any, expected: bool) -> None:
    assert matches(op, value, {"f": field_value}) is expected


@pytest.mark.parametrize(
    ("op", "value", "field_value", "expected"),
    [
        # Offsets are read: 10:00+02:00 is 08:00Z, so it is before 09:00Z.
        ("lt", "2026-03-01T09:00:00Z", "2026-03-01T10:00:00+02:00", True),
        ("gte", "2026-03-01T09:00:00Z", "2026-03-01T10:00:00+02:00", False),
        ("gte", "2026-03-01T08:00:00Z", "2026-03-01T10:00:00+02:00", True),
        # A bare date is midnight UTC.
        ("gte", "2026-03-01", "2026-03-01T00:00:00Z", True),
        ("gt", "2026-03-01", "2026-03-01T00:00:00Z", False),
        ("lte", "2026-03-01T00:00:00Z", "2026-03-01", True),
        ("gt", "2025-12-31T23:59:59Z", "2026-01-01", True),
        ("gt", "2026-01-01", "not a date", False),
        ("gt", "2026-01-01", 1_900_000_000, False),  # epoch seconds are numbers, not dates
        ("gt", "2026-01-01", ["2020-01-01", "2027-01-01"], True),
    ],
)
def test_dates_compare_as_instants(op: str, value: str, field_value: Any, expected: bool) -> None:
    assert matches(op, value, {"f": field_value}) is expected


@pytest.mark.parametrize("absent", [{}, {"f": None}, {"f": []}])
@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("eq", "x", False),
        ("in", ["x"], False),
        ("gt", 1, False),
        ("gte", 1, False),
        ("lt", 1, False),
        ("lte", "2026-01-01", False),
        ("exists", None, False),
        ("exists", True, False),
        # the negations are exactly "not eq" / "not in", as in MongoDB or a must_not clause
        ("neq", "x", True),
        ("not_in", ["x"], True),
        ("exists", False, True),
    ],
)
def test_missing_null_and_empty_list_fields_are_missing(
    absent: dict[str, Any], op: str, value: Any, expected: bool
) -> None:
    assert matches(op, value, absent) is expected


def test_other_fields_do_not_matter() -> None:
    assert matches("eq", "x", {"g": "x"}) is False
    assert matches("eq", "x", {"g": "y", "f": "x"}) is True


@pytest.mark.parametrize(
    ("field", "op", "value", "where", "rule"),
    [
        ("f", "regex", "^a", "relevance[0].op", "unknown operator 'regex'"),
        ("f", "in", "a", "relevance[0].value", "needs a list"),
        ("f", "not_in", [["a"]], "relevance[0].value", "needs a list"),
        ("f", "eq", ["a"], "relevance[0].value", "needs a string, number or boolean"),
        ("f", "eq", None, "relevance[0].value", "use op 'exists'"),
        ("f", "neq", {"a": 1}, "relevance[0].value", "needs a string, number or boolean"),
        ("f", "gt", "yesterday", "relevance[0].value", "RFC 3339"),
        ("f", "gt", True, "relevance[0].value", "RFC 3339"),
        ("f", "lt", float("nan"), "relevance[0].value", "RFC 3339"),
        ("f", "exists", "yes", "relevance[0].value", "true, false or no value"),
        ("", "eq", "a", "relevance[0].field", "non-empty"),
    ],
)
def test_malformed_predicates_are_invalid_not_guessed(
    field: str, op: str, value: Any, where: str, rule: str
) -> None:
    # model_construct skips the contract's validation: the worker must defend on its own.
    predicate = Predicate.model_construct(field=field, op=op, value=value)
    with pytest.raises(InvalidEvent) as info:
        compile_predicates([predicate], "body.retrieval.filters.relevance")
    assert info.value.reason == DeadLetterReason.INVALID_PREDICATE == "invalid_predicate"
    assert f"body.retrieval.filters.{where}" in info.value.detail
    assert rule in info.value.detail


def test_entitlement_needs_positive_evidence_for_a_leak() -> None:
    rules = compile_predicates([Predicate(field="tenant", op="eq", value="acme")], "e")
    assert entitlement_verdict({"tenant": "acme"}, rules) == ENTITLED
    assert entitlement_verdict({"tenant": "globex"}, rules) == LEAK
    assert entitlement_verdict({}, rules) == UNVERIFIED  # cannot be checked, so it pages no one
    two = compile_predicates(
        [Predicate(field="tenant", op="eq", value="acme"), Predicate(field="region", op="in", value=["eu"])],
        "e",
    )
    assert entitlement_verdict({"region": "us"}, two) == LEAK  # one checkable violation is enough
    assert count_verdicts([{"tenant": "acme"}, {"tenant": "x"}, {}, {"tenant": "y"}], rules) == (2, 1)
    assert count_verdicts([{"tenant": "x"}], ()) == (0, 0)
