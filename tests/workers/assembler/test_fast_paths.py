"""The assembler's fast paths give exactly what the plain code gives (pure logic, against plain versions)."""

from __future__ import annotations

import math
import struct
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from pydantic import ValidationError

from tests.service.api.otlp_builders import kv
from workers.assembler.assembler import _kind_and_annotations, stored_event
from workers.assembler.documents import _scalar, clean_metadata
from workers.assembler.view import _SCALARS, SpanView, any_value


def _plain_any_value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which in _SCALARS:
        return getattr(value, which)
    if which == "array_value":
        return [_plain_any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {item.key: _plain_any_value(item.value) for item in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return None


def _array(*items: dict[str, Any]) -> AnyValue:
    value = AnyValue()
    value.array_value.SetInParent()
    for item in items:
        value.array_value.values.add(**item)
    return value


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN included, and -0.0 told from 0.0 (bit for bit for floats)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize(
    "items",
    [
        [{"double_value": x} for x in (0.0, -0.0, 1.5, math.nan, math.inf, -math.inf, 5e-324, 1e308)],
        [{"double_value": float(i) / 7} for i in range(1536)],
        [{"double_value": 1.0}],
        [{"double_value": 1.0}, {"int_value": 2}],
        [{"int_value": 1}, {"int_value": 2}],
        [{"double_value": 1.0}, {}],  # an empty AnyValue
        [{"double_value": 1.0}, {"string_value": "abcdefg"}],  # an item of the same length as a double's
        [{"string_value": "a"}, {"bool_value": True}],
        [],
    ],
)
def test_arrays_read_as_the_plain_code_reads_them(items: list[dict[str, Any]]) -> None:
    value = _array(*items)
    assert _same(any_value(value), _plain_any_value(value))


def _plain_kind_and_annotations(span: Span) -> tuple[str | None, bool]:
    kind, annotated = None, False
    for item in span.attributes:
        if item.key == "openinference.span.kind":
            kind = item.value.string_value.upper()
        elif item.key.startswith("annotations."):
            annotated = True
    return kind, annotated


@pytest.mark.parametrize(
    "attributes",
    [
        [("openinference.span.kind", "llm"), ("input.value", "q")],
        [("input.value", "q"), ("openinference.span.kind", "retriever")],
        [
            ("openinference.span.kind", "llm"),
            ("openinference.span.kind", "chain"),
        ],  # a duplicate: the last wins
        [("openinference.span.kind", "llm"), ("input.value", "about openinference.span.kind")],
        [("input.value", "openinference.span.kind")],  # the key's text in a value only
        [("openinference.span.kind", "chain"), ("annotations.0.annotation.name", "thumbs")],
        [
            ("input.value", "annotations.0"),
            ("openinference.span.kind", "chain"),
        ],  # the prefix in a value only
        [("openinference.span.kind", 3)],  # not a string
        [("input.value", "q")],
        [],
    ],
)
def test_kind_and_annotations_from_the_bytes_as_from_every_attribute(
    attributes: list[tuple[str, Any]],
) -> None:
    span = Span(name="s", span_id=b"1" * 8, trace_id=b"2" * 16)
    span.attributes.extend(kv(key, value) for key, value in attributes)
    assert _kind_and_annotations(span, span.SerializeToString()) == _plain_kind_and_annotations(span)


def test_metadata_strings_are_cut_as_before() -> None:
    raw = {
        "short": "x",
        "long": "y" * 10_000,
        "n": 3,
        "f": math.nan,
        "list": ["a", 1, None],
        "nested": {"a": [1]},
    }
    assert clean_metadata(raw) == {
        k: [_scalar(v) for v in value if _scalar(v) is not None]
        if isinstance(value, list)
        else _scalar(value)
        for k, value in raw.items()
    }


def test_indexed_lists_are_in_index_order_whatever_the_attribute_order() -> None:
    attrs = {
        "d.10.x": "ten",
        "d.2.x": "two",
        "d.2.y": "two-y",
        "d.x.y": "not an index",
        "d.3": "no rest",
        "e.1.x": 0,
    }
    view = SpanView("s", "", "n", 0, 0, attrs)
    indexed = view.indexed("d")
    assert (
        list(indexed) == [2, 10] and indexed[2] == {"x": "two", "y": "two-y"} and indexed[10] == {"x": "ten"}
    )


def test_an_invalid_envelope_is_refused_every_time_a_valid_one_is_cached_per_type_and_tenant() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    event_id = "6b8b4567-1234-5678-9abc-def012345678"
    for _ in range(2):
        with pytest.raises(ValidationError):
            stored_event(event_id, "trace", "not a valid tenant!", at, {})
    assert b'"tenant":"acme"' in stored_event(event_id, "trace", "acme", at, {})
    assert b'"tenant":"acme"' in stored_event(event_id, "trace", "acme", at, {})  # the cached path
