"""A JSON Schema subset for the answers of apps that ask for JSON, with patterns on a linear-time engine.

Supported keywords: `type` (a name or a list of them), `properties`, `required`, `additionalProperties`
(true/false or a schema), `items` (a schema), `minItems`, `maxItems`, `enum`, `const`, `minLength`,
`maxLength`, `pattern`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, and the annotations
`title`, `description`, `$schema`, `$id`, `examples`, `default`. A schema using any other keyword is
refused when the config is loaded, naming it: a keyword that would be ignored silently is a check that
cannot fail. `pattern`s compile with RE2 (google-re2), which matches in time linear in the input and has
no backreferences or lookarounds; a pattern RE2 cannot compile is refused at load too.

validate() returns the first violation as "<path>: <rule>", or None. Depth is bounded by the schema
(the answer's own nesting is bounded by the JSON parser's depth limit).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import re2

KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "enum",
        "const",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "title",
        "description",
        "$schema",
        "$id",
        "examples",
        "default",
    }
)
TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
MAX_SCHEMA_DEPTH = 32


class SchemaError(ValueError):
    """A schema outside the supported subset (the config loader names it)."""


@dataclass
class Compiled:
    raw: dict[str, Any]
    types: frozenset[str] | None = None
    properties: dict[str, Compiled] = field(default_factory=dict)
    additional: Compiled | bool = True
    items: Compiled | None = None
    pattern: Any = None  # re2 compiled


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def compile_schema(schema: Any, where: str = "", depth: int = 0) -> Compiled:
    if not isinstance(schema, dict):
        raise SchemaError(f"{where or '/'}: a schema is an object")
    if depth > MAX_SCHEMA_DEPTH:
        raise SchemaError(f"{where}: nested deeper than {MAX_SCHEMA_DEPTH}")
    unknown = sorted(set(schema) - KEYWORDS)
    if unknown:
        raise SchemaError(
            f"{where or '/'}: keyword {unknown[0]!r} is not supported (supported: {sorted(KEYWORDS)})"
        )
    out = Compiled(schema)
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        bad = [n for n in names if n not in TYPES]
        if bad:
            raise SchemaError(f"{where}/type: {bad[0]!r} is not a JSON type ({sorted(TYPES)})")
        out.types = frozenset(names)
    for name, sub in (schema.get("properties") or {}).items():
        out.properties[name] = compile_schema(sub, f"{where}/properties/{name}", depth + 1)
    extra = schema.get("additionalProperties", True)
    out.additional = (
        extra
        if isinstance(extra, bool)
        else compile_schema(extra, f"{where}/additionalProperties", depth + 1)
    )
    if "items" in schema:
        out.items = compile_schema(schema["items"], f"{where}/items", depth + 1)
    if "pattern" in schema:
        try:
            out.pattern = re2.compile(schema["pattern"])
        except Exception as exc:  # re2.error: a construct RE2 does not have (backreferences, lookarounds)
            raise SchemaError(f"{where}/pattern: RE2 cannot compile {schema['pattern']!r}: {exc}") from exc
    return out


# The length bounds of strings (characters) and arrays (items): (keyword, broken when, what the error says).
_SIZE_BOUNDS: dict[str, tuple[tuple[str, Callable[[int, int], bool], str], ...]] = {
    "string": (("minLength", operator.lt, "shorter than"), ("maxLength", operator.gt, "longer than")),
    "array": (("minItems", operator.lt, "fewer than"), ("maxItems", operator.gt, "more than")),
}


def validate(value: Any, schema: Compiled, path: str = "") -> str | None:  # noqa: C901 - one rule per branch
    s, here = schema.raw, path or "/"
    kind = _type_of(value)
    if schema.types is not None and not (
        kind in schema.types or (kind == "integer" and "number" in schema.types)
    ):
        return f"{here}: {kind} where the schema wants {sorted(schema.types)}"
    if "enum" in s and value not in s["enum"]:
        return f"{here}: not one of the schema's enum values"
    if "const" in s and value != s["const"]:
        return f"{here}: not the schema's const"
    for key, bad, says in _SIZE_BOUNDS.get(kind, ()):
        if key in s and bad(len(value), s[key]):
            return f"{here}: {says} {key} {s[key]}"
    if kind == "string" and schema.pattern is not None and schema.pattern.search(value) is None:
        return f"{here}: does not match pattern {s['pattern']!r}"
    if kind in ("integer", "number"):
        if isinstance(value, float) and not math.isfinite(value):
            return f"{here}: not a finite number"
        for key, bad in (
            ("minimum", lambda v, b: v < b),
            ("maximum", lambda v, b: v > b),
            ("exclusiveMinimum", lambda v, b: v <= b),
            ("exclusiveMaximum", lambda v, b: v >= b),
        ):
            if key in s and bad(value, s[key]):
                return f"{here}: breaks {key} {s[key]}"
    if kind == "array" and schema.items is not None:
        for i, item in enumerate(value):
            found = validate(item, schema.items, f"{path}/{i}")
            if found:
                return found
    if kind == "object":
        for name in s.get("required", []):
            if name not in value:
                return f"{here}: required property {name!r} is missing"
        for name, item in value.items():
            sub = schema.properties.get(name)
            if sub is None:
                if schema.additional is False:
                    return f"{path}/{name}: not allowed (additionalProperties false)"
                if isinstance(schema.additional, Compiled):
                    sub = schema.additional
            if sub is not None:
                found = validate(item, sub, f"{path}/{name}")
                if found:
                    return found
    return None
