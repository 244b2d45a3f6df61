"""Limits before memory: counting a body from its bytes (service/api/wire.py) before it is parsed.

A parser builds every element it reads, so a count taken after parsing comes too late: these
tests hold the refusals to milliseconds and megabytes on bodies that once cost seconds and
gigabytes (issue 23, item 3), and the scans to a plain reference reader on any JSON.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.api import wire
from service.api.ingest import BatchPreparer
from service.api.ingest_body import parse_envelope
from service.api.ingest_errors import IngestError
from service.api.routes_otlp import _parse, rate_cost
from service.contracts import Topics
from service.contracts import vocabulary as L
from service.contracts.vocabulary import MAX_CLOCK_SKEW_S, MAX_EVENT_AGE_S
from tests.service.api.otlp_builders import export_of, new_trace_id, span

PB, JS = "application/x-protobuf", "application/json"


def _reference(text: str, at: tuple[int, ...]) -> tuple[int, dict[int, int]]:
    """Depth and item counts read character by character (the slow, obvious way)."""
    depth = deepest = 0
    inside = escaped = False
    items = dict.fromkeys(at, 0)
    for ch in text:
        if inside:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                inside = False
        elif ch == '"':
            inside = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if depth in items:
                items[depth] += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth in items:
            items[depth] += 1
    return deepest, items


json_docs = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.sampled_from('ab[]{},"\\:'), max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.sampled_from('k[]{},"\\'), max_size=3), inner, max_size=3)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(doc=json_docs, chunk=st.sampled_from([1, 2, 5, 64, 1 << 22]))
def test_the_shape_is_the_reference_readers_whatever_the_chunking(doc: Any, chunk: int) -> None:
    text = json.dumps(doc)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(wire, "_CHUNK", chunk)
        shape = wire.json_shape(text.encode(), (1, 2, 3))
    assert (shape.max_depth, shape.items) == _reference(text, (1, 2, 3))


def _timed_peak(work: Any) -> tuple[BaseException | None, float, int]:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        work()
        raised: BaseException | None = None
    except IngestError as exc:
        raised = exc
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return raised, elapsed, peak


def test_millions_of_empty_events_are_refused_before_they_are_built() -> None:
    body = b'{"events":[' + b",".join([b"{}"] * 6_900_000) + b"]}"  # 20 MB; built, 670 MB
    raised, elapsed, peak = _timed_peak(lambda: parse_envelope(body, L.MAX_EVENTS_PER_BATCH))
    assert isinstance(raised, IngestError) and raised.status == 413 and raised.rule == "max_length"
    assert "6900000 events in one batch; at most 1000" in raised.message
    assert peak < 120 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"
    assert elapsed < 3, f"{elapsed:.2f}s"


@pytest.mark.parametrize("depth", [65, 2_000, 100_000])
def test_deep_nesting_is_a_400_naming_the_rule_on_both_paths(depth: int) -> None:
    body = (
        b'{"events":[{"type":"trace","id":"x","timestamp":"t","body":{"m":'
        + b"[" * depth
        + b"]" * depth
        + b"}}]}"
    )
    preparer = BatchPreparer(Topics("t"), None, MAX_EVENT_AGE_S, MAX_CLOCK_SKEW_S, 20)
    events = preparer.decode_plain(body)  # declined, never a RecursionError
    assert events is None or preparer.prepare_plain(events, "acme", None) is None
    with pytest.raises(IngestError) as refused:
        parse_envelope(body, 20)
    assert (
        refused.value.status == 400
        and refused.value.rule == "max_json_depth"
        and refused.value.field == "body"
    )


def test_nesting_at_the_limit_is_judged_event_by_event() -> None:
    inner = L.MAX_JSON_DEPTH - 4  # {events[ {body{ m: ...}}]}: four levels above the value
    body = b'{"events":[{"body":{"m":' + b"[" * inner + b"]" * inner + b"}}]}"
    assert len(parse_envelope(body, 20)) == 1


def _empty_resources(n: int) -> bytes:
    return b"\x0a\x00" * n  # field 1 (resource_spans), length 0


def test_ten_million_empty_resource_entries_are_refused_from_the_wire() -> None:
    body = _empty_resources(10_000_000)  # once 58 s and 6.2 GB before a 200
    raised, elapsed, peak = _timed_peak(lambda: _parse(body, PB, 20_000))
    assert (
        isinstance(raised, IngestError)
        and raised.status == 413
        and raised.rule == "otlp_max_resource_entries"
    )
    assert elapsed < 0.5 and peak < 10 * 1024 * 1024, (elapsed, peak)


def test_entries_and_fields_are_bounded_and_charged() -> None:
    export, counts = _parse(_empty_resources(L.OTLP_MAX_RESOURCE_ENTRIES), PB, 20_000)
    assert (counts.resources, counts.spans) == (L.OTLP_MAX_RESOURCE_ENTRIES, 0)
    assert rate_cost(counts, 2 * L.OTLP_MAX_RESOURCE_ENTRIES) == L.OTLP_MAX_RESOURCE_ENTRIES  # not free
    assert rate_cost(counts, 0) == L.OTLP_MAX_RESOURCE_ENTRIES
    _, three = _parse(b"\x0a\x06" + b"\x12\x00" * 3, PB, 20_000)
    assert (three.resources, three.scopes) == (1, 3)
    many_scopes = b"\x12\x00" * (L.OTLP_MAX_SCOPE_ENTRIES + 1)
    with pytest.raises(IngestError) as refused:
        _parse(b"\x0a" + _varint(len(many_scopes)) + many_scopes, PB, 20_000)
    assert refused.value.status == 413 and refused.value.rule == "otlp_max_scope_entries"
    unknown = b"\x78\x00" * 1_000_000  # field 15, varint: unknown fields cost a step each too
    with pytest.raises(IngestError) as fields:
        _parse(unknown, PB, 20_000)
    assert fields.value.rule == "otlp_max_fields"
    with pytest.raises(IngestError) as truncated:
        _parse(b"\x0a\x05\x12", PB, 20_000)
    assert truncated.value.status == 400 and truncated.value.rule == "otlp_protobuf"


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_spans_over_the_limit_are_counted_from_the_wire() -> None:
    tid = new_trace_id()
    body = export_of([span(tid) for _ in range(11)]).SerializeToString()
    with pytest.raises(IngestError) as refused:
        _parse(body, PB, 10)
    assert refused.value.status == 413 and "at most 10" in refused.value.message
    export, counts = _parse(body, PB, 11)
    assert counts.spans == 11 and len(export.resource_spans) == 1


def test_otlp_json_is_bounded_alike() -> None:
    empty = json.dumps({"resourceSpans": [{}] * (L.OTLP_MAX_RESOURCE_ENTRIES + 1)}).encode()
    with pytest.raises(IngestError) as resources:
        _parse(empty, JS, 20_000)
    assert resources.value.status == 413 and resources.value.rule == "otlp_max_resource_entries"
    scopes = json.dumps(
        {"resourceSpans": [{"resource": {}, "scopeSpans": [{}] * (L.OTLP_MAX_SCOPE_ENTRIES + 5)}]}
    )
    with pytest.raises(IngestError) as scope_refusal:
        _parse(scopes.encode(), JS, 20_000)
    assert scope_refusal.value.rule == "otlp_max_scope_entries"
    deep = b'{"resourceSpans":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(IngestError) as too_deep:
        _parse(deep, JS, 20_000)
    assert too_deep.value.status == 400 and too_deep.value.rule == "max_json_depth"
