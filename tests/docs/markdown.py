"""Just enough Markdown for the doc tests: a section under a heading, its pipe tables, its bullets."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_HEADING = re.compile(r"^(#+) (.*)$")


def section(text: str, heading: str) -> str:
    """The lines under `heading` up to the next heading of the same or a higher level."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _HEADING.match(line)
        if m and m.group(2).strip() == heading:
            level = len(m.group(1))
            body = []
            for rest in lines[i + 1 :]:
                n = _HEADING.match(rest)
                if n and len(n.group(1)) <= level:
                    break
                body.append(rest)
            return "\n".join(body)
    raise AssertionError(f"no heading {heading!r}")


def tables(text: str) -> list[list[dict[str, str]]]:
    """Every pipe table in `text` (at the start of a line), as rows keyed by the header's cells."""
    found: list[list[dict[str, str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i + 1].strip()):
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(dict(zip(header, _cells(lines[i]), strict=True)))
                i += 1
            found.append(rows)
        else:
            i += 1
    return found


def table(text: str, first_column: str) -> list[dict[str, str]]:
    """The one table in `text` whose first header cell is `first_column`."""
    matches = [t for t in tables(text) if t and next(iter(t[0])) == first_column]
    assert len(matches) == 1, f"expected one table headed {first_column!r}, found {len(matches)}"
    return matches[0]


def code(cell: str) -> str:
    """The text of a cell that is one code span: "`ragmon-overview`" -> "ragmon-overview"."""
    m = re.fullmatch(r"`([^`]+)`", cell.strip())
    assert m, f"expected one code span, got {cell!r}"
    return m.group(1)


def words(cell: str, vocabulary: set[str]) -> set[str]:
    """The words of `cell` that are in `vocabulary` (worker or topic names in a prose cell).

    Text in parentheses is a note (a file, an example) and does not count.
    """
    return {w for w in re.findall(r"[A-Za-z_]+", re.sub(r"\([^()]*\)", "", cell)) if w in vocabulary}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]
