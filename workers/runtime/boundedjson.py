"""JSON from clients (span attributes, metadata strings), parsed with a bound on its nesting.

A client can put any string in an OTLP attribute. Python's `json` recurses once
per level and raises RecursionError on a deeply nested one; that exception is
not a ValueError, so a `try: json.loads(...) except ValueError` lets it escape
and fail the whole batch or tick, for every tenant, on every retry. Nothing in
the v1 contract nests deeper than a few levels (a body, its retrieval, a
document, its metadata, a list), so a value nested deeper than MAX_DEPTH can
never be valid: it is refused here, as a ValueError, before anything walks it.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# Deepest nesting a client JSON value may have. The contract needs 5 (trace body > retrieval > documents >
# document > metadata > list); the margin is for apps that send a whole sub-object as one attribute.
MAX_DEPTH = 32


class JsonTooDeep(ValueError):
    """A JSON value nested deeper than the bound (a ValueError: callers treat it as bad input)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"JSON nested deeper than {limit} levels")
        self.limit = limit


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` (parsed JSON) nests containers deeper than `limit`; iterative, never recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def loads(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """Parse client JSON; ValueError (JsonTooDeep when nested deeper than `limit`) for anything refused.

    orjson first: fast, and it refuses nesting past 1024 levels with a JSONDecodeError, without recursion
    in Python. What orjson refuses for another reason (NaN, integers beyond 64 bits) is given to `json`,
    whose RecursionError becomes JsonTooDeep.
    """
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc):
            raise JsonTooDeep(limit) from None
        try:
            parsed = json.loads(text)
        except RecursionError:
            raise JsonTooDeep(limit) from None
    if depth_exceeds(parsed, limit):
        raise JsonTooDeep(limit)
    return parsed
