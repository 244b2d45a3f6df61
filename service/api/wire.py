"""Counting a request from its bytes, before anything is built from them.

A parser builds every element it reads: a JSON array of millions of `{}` or an
OTLP export of millions of empty ResourceSpans costs hundreds of megabytes and
seconds of CPU before any count could refuse it. These scans read only the
structure and refuse what is over a limit first:

- `json_shape`: the nesting depth of a JSON text and how many items sit at
  one depth (the elements of `{"events": [...]}` or of `resourceSpans`), with
  vectorised passes over the bytes (no Python step per byte).
- `count_export`: the resource, scope and span entries of an OTLP protobuf
  ExportTraceServiceRequest, read from the field tags; it skips each span's
  bytes and stops at the first limit passed, so its cost is bounded by the
  limits, not by the body.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from service.api.ingest_errors import IngestError

_ESCAPE = re.compile(rb"\\.", re.S)  # a backslash and what it escapes: neither is structure
_CHUNK = 1 << 20  # bytes per vectorised pass: its temporary arrays stay a few times 8 bytes a byte
_QUOTE, _OPEN_LIST, _OPEN_OBJ, _CLOSE_LIST, _CLOSE_OBJ, _COMMA = 34, 91, 123, 93, 125, 44


@dataclass(frozen=True)
class JsonShape:
    max_depth: int
    items: dict[
        int, int
    ]  # depth -> values held by the containers whose values are at that depth (upper bound)


def json_shape(data: bytes, count_at: tuple[int, ...] = ()) -> JsonShape:
    """The deepest nesting of `data` (1 inside the outermost container) and, for each depth in
    `count_at`, an upper bound of the values held directly by containers at that depth (their
    commas plus one per container). Strings are skipped (brackets in text are not structure); the
    text need not be valid JSON: the parser that follows judges that.

    Only the positions of quotes, brackets and commas are kept (an ordinary body has a few per
    hundred bytes), a chunk at a time, so the temporary arrays stay bounded whatever the body.
    """
    text = _ESCAPE.sub(b"", data) if b"\\" in data else data
    quotes_before, depth, deepest = 0, 0, 0
    items = dict.fromkeys(count_at, 0)
    for start in range(0, len(text), _CHUNK):
        chunk = np.frombuffer(text, np.uint8, count=min(_CHUNK, len(text) - start), offset=start)
        quotes = np.flatnonzero(chunk == _QUOTE)
        brackets = _outside(
            quotes,
            quotes_before,
            np.flatnonzero(
                (chunk == _OPEN_LIST) | (chunk == _OPEN_OBJ) | (chunk == _CLOSE_LIST) | (chunk == _CLOSE_OBJ)
            ),
        )
        quotes_before += len(quotes)
        opening = (chunk[brackets] == _OPEN_LIST) | (chunk[brackets] == _OPEN_OBJ)
        after = np.cumsum(np.where(opening, 1, -1), dtype=np.int64)
        after += depth
        if len(after):
            deepest = max(deepest, int(after.max()))
        if items:
            commas = _outside(quotes, quotes_before - len(quotes), np.flatnonzero(chunk == _COMMA))
            last = np.searchsorted(brackets, commas) - 1  # the bracket before each comma sets its depth
            at_comma = np.where(last >= 0, after[last] if len(after) else depth, depth)
            opened_at = after[opening]  # a container whose values are at depth d: one more than its commas
            for d in items:
                items[d] += int(np.count_nonzero(at_comma == d)) + int(np.count_nonzero(opened_at == d))
        if len(after):
            depth = int(after[-1])
    return JsonShape(deepest, items)


def _outside(quotes: np.ndarray, quotes_before: int, positions: np.ndarray) -> np.ndarray:
    """The positions not inside a string: an even number of quotes before them."""
    if not len(quotes) and not quotes_before & 1:
        return positions
    return positions[((np.searchsorted(quotes, positions) + quotes_before) & 1) == 0]


@dataclass
class ExportCounts:
    resources: int = 0
    scopes: int = 0
    spans: int = 0

    @property
    def entries(self) -> int:
        return self.resources + self.scopes


class _Malformed(Exception):
    pass


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Malformed
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


class _Budget:
    """Fields a scan may still step over: every field costs a Python step, whatever its kind."""

    def __init__(self, fields: int) -> None:
        self.left = fields


def _fields(data: bytes, pos: int, end: int, budget: _Budget) -> Iterator[tuple[int, int, int]]:
    """(field number, start, stop) of each length-delimited field in data[pos:end]; others skipped."""
    while pos < end:
        budget.left -= 1
        if budget.left < 0:
            raise IngestError(
                413,
                "the export holds more fields than its entries and spans allow",
                field="resourceSpans",
                rule="otlp_max_fields",
            )
        tag, pos = _varint(data, pos, end)
        wire = tag & 7
        if wire == 0:
            _, pos = _varint(data, pos, end)
            continue
        if wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(data, pos, end)
            if pos + size > end:
                raise _Malformed
            yield tag >> 3, pos, pos + size
            pos += size
            continue
        else:  # groups (3, 4) and 6, 7: not in OTLP
            raise _Malformed
        if pos > end:
            raise _Malformed


_RESOURCE_SPANS = _SCOPE_SPANS = _SPANS = 2
_EXPORT_RESOURCE_SPANS = 1


def count_export(data: bytes, max_resources: int, max_scopes: int, max_spans: int) -> ExportCounts:
    """Resource, scope and span entries of an ExportTraceServiceRequest, refused (413) at the
    first count over its limit; a body whose tags do not frame is a 400, as the parser would say."""
    # Each level: the field number of its entries inside the level above, what the refusal names, the
    # limit and its rule. Entries are counted in the order a parser reads them.
    levels = (
        (_EXPORT_RESOURCE_SPANS, "resourceSpans", max_resources, "otlp_max_resource_entries"),
        (_RESOURCE_SPANS, "scopeSpans", max_scopes, "otlp_max_scope_entries"),
        (_SPANS, "spans", max_spans, "otlp_max_spans_per_request"),
    )
    seen = [0] * len(levels)
    # What a well-formed export steps over: each span, and a few fields per resource and scope entry.
    budget = _Budget(max_spans + 4 * (max_resources + max_scopes) + 16)

    def count(depth: int, start: int, stop: int) -> None:
        number, what, limit, rule = levels[depth]
        deeper, n = depth + 1 < len(levels), seen[depth]
        for entry, entry_start, entry_stop in _fields(data, start, stop, budget):
            if entry != number:
                continue
            n += 1
            if n > limit:
                raise _over(what, n, limit, rule)
            if deeper:
                count(depth + 1, entry_start, entry_stop)
        seen[depth] = n

    try:
        count(0, 0, len(data))
    except _Malformed:
        raise IngestError(
            400,
            "body is not a valid ExportTraceServiceRequest protobuf: its fields do not frame",
            field="body",
            rule="otlp_protobuf",
        ) from None
    return ExportCounts(*seen)


def _over(what: str, seen: int, limit: int, rule: str) -> IngestError:
    return IngestError(
        413,
        f"at least {seen} {what} in one export; at most {limit}: lower the exporter's batch size",
        field="resourceSpans",
        rule=rule,
    )
