"""Reading a JSON-lines file (golden sets, probe files, samples, offline pairs) with errors naming the line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any


def json_lines(
    lines: Iterable[str], error: Callable[[str], Exception], name: str | None = None
) -> Iterator[tuple[int, Any]]:
    """(line number from 1, parsed value) of each line that is not blank.

    A line that is not JSON raises `error("[name: ]line N: not JSON (why)")`.
    """
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            where = f"{name}: line {number}" if name else f"line {number}"
            raise error(f"{where}: not JSON ({exc.msg})") from None
        yield number, value
