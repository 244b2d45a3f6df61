"""docs/conventions.md lists only rules a test enforces: every rule names its test, and the test exists.

A rule is a bullet; it cites `tests/<path>.py::<test function>` (or a whole test
file). The file must exist and define that function, so a renamed or deleted
test takes its rule out of the document or back under a test.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from tests.docs.markdown import ROOT, section
from tests.test_metric_names import SUBSYSTEMS

DOC = (ROOT / "docs" / "conventions.md").read_text()
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def _bullets(text: str) -> list[str]:
    """Each `- ` bullet with its indented continuation lines, across every section."""
    bullets: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("- "):
            bullets.append(line[2:])
            inside = True
        elif inside and line.startswith("  "):
            bullets[-1] += " " + line.strip()
        else:
            inside = False
    return bullets


@cache
def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_rule_names_a_test() -> None:
    rules = _bullets(DOC)
    assert len(rules) >= 20, "the rules were read"
    untested = [rule[:80] for rule in rules if not REFERENCE.search(rule)]
    assert untested == [], "rules that name no test that enforces them"


def test_every_test_a_rule_names_exists() -> None:
    references = [m.groups() for m in REFERENCE.finditer(DOC)]
    assert len(references) >= 30, "the references were read"
    missing = []
    for file, function in references:
        path = ROOT / file
        if not path.is_file():
            missing.append(file)
        elif function and function not in _functions(path):
            missing.append(f"{file}::{function}")
    assert missing == []


def test_the_subsystems_listed_are_the_checkers() -> None:
    rule = next(
        b for b in _bullets(section(DOC, "Metric names")) if b.startswith("`ragmon_<subsystem>_<name>`")
    )
    listed = re.findall(r"`([a-z]+)`", rule.split("one of", 1)[1].split("(", 1)[0])
    assert listed == list(SUBSYSTEMS)
