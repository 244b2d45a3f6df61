"""A read-only view of one OTLP span with its attributes as Python values (pure, no Redis, no Kafka)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from workers.runtime import boundedjson

_SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value"})
# An array of doubles (an embedding vector) on the wire: per item the tag of `values` (0x0a), the item's length (9),
# the tag of `double_value` (0x21) and its 8 bytes. Such an array is read in one struct.unpack instead of two
# protobuf calls per item; any other shape (ints, strings, unknown fields) takes the general path.
_DOUBLE_ITEM = 11
_DOUBLE_LAYOUTS: dict[int, struct.Struct] = {}


def _doubles(array: Any, n: int) -> list[float] | None:
    """The items of an ArrayValue holding only doubles, or None when it holds anything else."""
    data = array.SerializeToString()
    if (
        len(data) != _DOUBLE_ITEM * n
        or data[0::11] != b"\x0a" * n
        or data[1::11] != b"\x09" * n
        or data[2::11] != b"\x21" * n
    ):
        return None
    layout = _DOUBLE_LAYOUTS.get(n)
    if layout is None:
        if len(_DOUBLE_LAYOUTS) >= 64:
            _DOUBLE_LAYOUTS.clear()
        layout = _DOUBLE_LAYOUTS[n] = struct.Struct("<" + "3xd" * n)
    return list(layout.unpack(data))


# An error's type and message are read for their error type only (workers/assembler/outcome.py): a bounded
# prefix, so a hostile megabyte of message costs nothing more than a short one.
MAX_ERROR_TEXT = 2000


def _exception(events: Any) -> tuple[str, str] | None:
    """exception.type and exception.message of the first `exception` event (OTel's record_exception)."""
    for event in events:
        if event.name == "exception":
            attrs = {
                kv.key: kv.value
                for kv in event.attributes
                if kv.key in ("exception.type", "exception.message")
            }
            kind, message = attrs.get("exception.type"), attrs.get("exception.message")
            return (
                kind.string_value[:MAX_ERROR_TEXT] if kind is not None else "",
                message.string_value[:MAX_ERROR_TEXT] if message is not None else "",
            )
    return None


def any_value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which in _SCALARS:
        return getattr(value, which)
    if which == "array_value":
        items = value.array_value.values
        if len(items) > 1:
            doubles = _doubles(value.array_value, len(items))
            if doubles is not None:
                return doubles
        # Vectors and string lists: one WhichOneof per item, no recursion for scalars.
        return [getattr(v, w) if (w := v.WhichOneof("value")) in _SCALARS else any_value(v) for v in items]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which) if which else None


def attribute_map(attributes: Any) -> dict[str, Any]:
    # any_value inlined for scalars (most attributes): one WhichOneof and no call per attribute
    return {
        kv.key: getattr(v, w) if (w := (v := kv.value).WhichOneof("value")) in _SCALARS else any_value(v)
        for kv in attributes
    }


@dataclass
class SpanView:
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any]
    dropped_attributes: int = 0
    events: list[tuple[str, int]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (trace id hex, span id hex)
    failed: bool = False  # span status ERROR
    status_message: str = ""
    exception: tuple[str, str] | None = None  # the first `exception` event's exception.type and .message

    @classmethod
    def of(cls, span: Span) -> SpanView:
        events, links = span.events, span.links  # mostly empty: no comprehension then
        return cls(
            span.span_id.hex(),
            span.parent_span_id.hex(),
            span.name,
            span.start_time_unix_nano,
            span.end_time_unix_nano,
            attribute_map(span.attributes),
            span.dropped_attributes_count,
            [(e.name, e.time_unix_nano) for e in events] if events else [],
            [(link.trace_id.hex(), link.span_id.hex()) for link in links] if links else [],
            span.status.code == Status.STATUS_CODE_ERROR,
            span.status.message[:MAX_ERROR_TEXT] if span.status.code == Status.STATUS_CODE_ERROR else "",
            _exception(events) if events else None,
        )

    # The OpenInference span kind (upper case), or None for a span that is not OpenInference (read once).
    kind: str | None = field(init=False, default=None)
    _metadata: dict[str, Any] | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        value = self.attrs.get("openinference.span.kind")
        self.kind = value.upper() if isinstance(value, str) and value else None

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6

    def text(self, key: str) -> str | None:
        value = self.attrs.get(key)
        return value if isinstance(value, str) and value else None

    def number(self, key: str) -> float | None:
        value = self.attrs.get(key)
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return None
        return None

    @property
    def metadata(self) -> dict[str, Any]:
        """The OpenInference `metadata` attribute (a JSON object as a string), {} when absent or not an object.

        Parsed once: every ragmon.* lookup reads it (kept by hand: functools.cached_property takes a lock per read).
        """
        parsed = self._metadata
        if parsed is None:
            parsed = self._metadata = json_object(self.attrs.get("metadata"))
        return parsed

    def indexed(self, prefix: str) -> dict[int, dict[str, Any]]:
        """Flattened lists: `prefix.N.rest` -> {N: {rest: value}} (OpenInference's way to send lists)."""
        out: dict[int, dict[str, Any]] = {}
        dotted = prefix + "."
        cut = len(dotted)
        for key, value in self.attrs.items():
            if key.startswith(dotted):
                index, _, rest = key[cut:].partition(".")
                if rest and index.isdigit():
                    n = int(index)
                    fields = out.get(n)
                    if fields is None:
                        out[n] = {rest: value}
                    else:
                        fields[rest] = value
        return out if len(out) < 2 or list(out) == sorted(out) else dict(sorted(out.items()))


def json_object(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value.startswith("{"):
        return {}
    try:  # several per trace (each document's metadata): orjson first, then json for NaN and big integers
        parsed = boundedjson.loads(value)
    except ValueError:  # not JSON, or nested past the bound: no object here
        return {}
    return parsed if isinstance(parsed, dict) else {}
