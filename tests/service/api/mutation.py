"""Single-value mutations of valid events: any JSON value (also what strict JSON forbids) put anywhere.

Shared by the API's mutation fuzzer (test_api_fuzz.py) and the plain-path agreement test
(test_plain_batch.py).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# A JSON value of any shape, including what strict JSON forbids: NaN, Infinity, lone surrogates,
# integers past 64 bits.
any_text = st.text(st.characters(exclude_categories=()), max_size=40)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)


def set_path(doc: Any, path: list[Any], value: Any) -> None:
    for step in path[:-1]:
        doc = doc[step]
    doc[path[-1]] = value


def value_paths(doc: Any, prefix: list[Any] | None = None) -> list[list[Any]]:
    """The path (keys and indexes) of every value inside `doc`."""
    prefix = prefix or []
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.extend(value_paths(v, [*prefix, k]))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.extend(value_paths(v, [*prefix, i]))
    return out
