"""Filter predicates compiled once per trace and evaluated on candidate metadata.

Semantics (chosen to match the document stores RAG apps filter in: MongoDB,
Elasticsearch/OpenSearch, Qdrant; SQL differs, see below):

- A field that is absent, null or an empty list is *missing*. Elasticsearch
  indexes none of the three, so a store cannot tell them apart either.
- `eq`, `in`, `gt`, `gte`, `lt`, `lte` and `exists` (true) fail on a missing
  field; `neq`, `not_in` and `exists` (false) pass. `neq` is exactly "not
  eq" and `not_in` exactly "not in", as in MongoDB's `$ne`/`$nin` and a
  `must_not` clause. (SQL's three-valued logic would drop the row for `<>`
  too; an app on pgvector that relies on that should filter with `exists`.)
- A list-valued field matches when any element does (`tags eq "x"` means
  "tagged x"), so its negations mean "no element does".
- Values compare within their type: a bool never equals a number (in Python
  `True == 1`), a string never equals a number. `eq`/`in` compare values
  exactly, strings included; only the ordering operators read strings as RFC
  3339 instants, because only they need an order.
- An ordering predicate whose value is a number only matches numbers, one
  whose value is a date only matches strings that parse as instants (a bare
  date is midnight UTC); anything else is a type mismatch and does not match.

A predicate the worker cannot interpret (unknown operator, a value of the
wrong shape) raises InvalidEvent: the event is dead-lettered with the field
path and the rule, never evaluated under a guessed meaning.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from service.contracts import PREDICATE_OPS, parse_instant
from service.contracts.vocabulary import ORDERING_OPS
from workers.runtime.reasons import DeadLetterReason
from workers.runtime.types import InvalidEvent

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


@dataclass(frozen=True, slots=True)
class PredicateRef:
    """What a predicate is reported as: field and operator, never its value
    (values may be sensitive, e.g. a customer id, or unbounded)."""

    field: str
    op: str


@dataclass(frozen=True, slots=True)
class CompiledPredicate:
    """`test` decides a present value; `if_missing` is the verdict for a missing one."""

    field: str
    op: str
    test: Callable[[Any], bool]
    if_missing: bool

    @property
    def ref(self) -> PredicateRef:
        return PredicateRef(self.field, self.op)

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        value = metadata.get(self.field)
        if value is None or value == []:
            return self.if_missing
        return self.test(value)


@lru_cache(maxsize=8192)
def _instant(text: str) -> datetime | None:
    # Candidates of one corpus repeat the same few dates; parsing is the costly part.
    return parse_instant(text)


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _is_scalar(x: Any) -> bool:
    return isinstance(x, bool | str) or _is_number(x)


class _ValueSet:
    """Exact membership split by type, so True never matches 1 and "1" never 1."""

    __slots__ = ("bools", "numbers", "strings")

    def __init__(self, values: Iterable[Any]) -> None:
        vals = list(values)
        self.bools = frozenset(v for v in vals if isinstance(v, bool))
        self.numbers = frozenset(v for v in vals if _is_number(v))
        self.strings = frozenset(v for v in vals if isinstance(v, str))

    def has(self, x: Any) -> bool:
        # Exact type checks: this runs for every candidate and predicate, and
        # `type(x) is` is several times cheaper than isinstance on a union.
        kind = type(x)
        if kind is str:
            return x in self.strings
        if kind is bool:
            return x in self.bools
        if kind is int or kind is float:
            return x in self.numbers  # an int and an equal float hash alike: 1 matches 1.0
        return False

    def any_of(self, value: Any) -> bool:
        kind = type(value)
        if kind is str:  # the common case, decided without a further call
            return value in self.strings
        if kind is list:
            return any(self.has(x) for x in value)
        return self.has(value)


def _invalid(where: str, rule: str) -> InvalidEvent:
    return InvalidEvent(DeadLetterReason.INVALID_PREDICATE, f"{where}: {rule}")


def _membership(op: str, value: Any, where: str) -> Callable[[Any], bool]:
    if op in ("eq", "neq"):
        if not _is_scalar(value):
            raise _invalid(
                f"{where}.value",
                f"op '{op}' needs a string, number or boolean"
                + (" (a null value is ambiguous: use op 'exists')" if value is None else ""),
            )
        items = _ValueSet([value])
    else:
        if not isinstance(value, list) or not all(_is_scalar(v) for v in value):
            raise _invalid(f"{where}.value", f"op '{op}' needs a list of strings, numbers or booleans")
        items = _ValueSet(value)
    if op in ("eq", "in"):
        return items.any_of
    return lambda v: not items.any_of(v)


def _ordering(op: str, value: Any, where: str) -> Callable[[Any], bool]:
    compare = _ORDER[op]
    if _is_number(value):

        def number_test(v: Any) -> bool:
            kind = type(v)
            if kind is int or kind is float:
                return compare(v, value)
            if kind is list:
                return any(_is_number(x) and compare(x, value) for x in v)
            return False

        return number_test
    bound = _instant(value) if isinstance(value, str) else None
    if bound is None:
        raise _invalid(
            f"{where}.value",
            f"op '{op}' needs a finite number or an RFC 3339 date, got {type(value).__name__}",
        )

    def instant_test(v: Any) -> bool:
        if type(v) is str:
            at = _instant(v)
            return at is not None and compare(at, bound)
        if type(v) is list:
            return any(instant_test(x) for x in v if type(x) is str)
        return False

    return instant_test


def compile_predicate(predicate: Any, where: str) -> CompiledPredicate:
    """Compile one contract Predicate (or anything with field/op/value); `where`
    is its path in the event, e.g. `body.retrieval.filters.relevance[1]`."""
    field = getattr(predicate, "field", None)
    op = getattr(predicate, "op", None)
    value = getattr(predicate, "value", None)
    if not isinstance(field, str) or not field:
        raise _invalid(f"{where}.field", "needs a non-empty metadata field name")
    if op not in PREDICATE_OPS:
        raise _invalid(f"{where}.op", f"unknown operator {op!r}; known: {', '.join(PREDICATE_OPS)}")
    if op == "exists":
        if value is not None and not isinstance(value, bool):
            raise _invalid(f"{where}.value", "op 'exists' takes true, false or no value")
        present = value is not False
        return CompiledPredicate(field, op, lambda _v: present, not present)
    if op in ORDERING_OPS:
        return CompiledPredicate(field, op, _ordering(op, value, where), False)
    return CompiledPredicate(field, op, _membership(op, value, where), op in ("neq", "not_in"))


def compile_predicates(predicates: Sequence[Any], where: str) -> tuple[CompiledPredicate, ...]:
    return tuple(compile_predicate(p, f"{where}[{i}]") for i, p in enumerate(predicates))
