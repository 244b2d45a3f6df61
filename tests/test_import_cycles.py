"""No two modules of service/ or workers/ import each other, directly or round a loop, when they load.

Only what runs at import time counts: a module's top-level imports (also inside
a top-level `try`, `if` or class body). An import inside a function runs when
the function is called, and one under `if TYPE_CHECKING:` never runs, so
neither can leave a module half-initialised. Read with `ast`, no module is
imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.imports import ROOT, absolute_target, module_name

PACKAGES = ("service", "workers")

# Cycles that stand today in files this test's author could not change at the time; each is a
# set of modules that import one another round a loop. Remove an entry once its cycle is broken
# (the test fails on an entry that no longer stands, so this list only shrinks).
# None is left: the last (service.api.ingest and service.api.wire) was broken when IngestError
# moved to service/api/ingest_errors.py.
ALLOWED: set[frozenset[str]] = set()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _load_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements among `body` that run when the module loads."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _load_time_imports(node.body)
            yield from _load_time_imports(node.orelse)
        elif isinstance(node, ast.ClassDef):
            yield from _load_time_imports(node.body)
        else:  # try, with, for, while, match: every nested statement list
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(node, field, []):
                    if isinstance(child, ast.ExceptHandler | ast.match_case):
                        yield from _load_time_imports(child.body)
                    elif isinstance(child, ast.stmt):
                        yield from _load_time_imports([child])


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of `known` that `node` loads by name (the longest known prefix of each name)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = absolute_target(module, is_package, node)
        # `from service.local import up` loads service.local.up (its package is loaded before any of
        # its modules anyway, so that is no edge); `from x.y import name` reads x.y's names.
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    out = set()
    for name in names:
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in known:
                out.add(".".join(parts[:end]))
                break
    return out


def import_graph(files: list[Path], root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules it imports at load time, among `files` (named from `root`)."""
    known = {module_name(path, root) for path in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        module = module_name(path, root)
        tree = ast.parse(path.read_text(), filename=str(path))
        edges: set[str] = set()
        for node in _load_time_imports(tree.body):
            edges |= _targets(node, module, path.name == "__init__.py", known)
        graph[module] = edges - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    files = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    out = import_graph(files)
    # Cannot pass by reading nothing: the API, the contract and a worker were parsed, with their imports.
    assert {"service.api.app", "service.contracts.events", "workers.runtime.consumer"} <= out.keys()
    assert "service.contracts.settings" in out["workers.runtime.app"]
    return out


def test_no_module_level_import_cycle(graph: dict[str, set[str]]) -> None:
    found = cycles(graph)
    new = sorted(sorted(c) for c in found - ALLOWED)
    assert new == [], f"modules importing one another at load time: {new}"


def test_every_allowed_cycle_still_stands(graph: dict[str, set[str]]) -> None:
    gone = sorted(sorted(c) for c in ALLOWED - cycles(graph))
    assert gone == [], f"these cycles are broken: remove them from ALLOWED: {gone}"


def test_the_checker_sees_a_cycle_and_ignores_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    sources = {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "try:\n    import pkg.a\nexcept ImportError:\n    pass\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\n",
        "d.py": "def f():\n    from pkg import c\n\n\nclass D:\n    from .c import X\n    from . import e\n",
        "e.py": "def f():\n    import pkg.a\n",
    }
    (tmp_path / "pkg").mkdir()
    for name, text in sources.items():
        (tmp_path / "pkg" / name).write_text(text)
    graph = import_graph(sorted((tmp_path / "pkg").iterdir()), tmp_path)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.c"] == set() and graph["pkg.e"] == set()
    assert graph["pkg.d"] == {"pkg.c", "pkg.e"}  # a class body runs at load time; relative imports resolved
    assert cycles(graph) == {frozenset({"pkg.a", "pkg.b"})}
    assert cycles({**graph, "pkg.c": {"pkg.d"}}) == {
        frozenset({"pkg.a", "pkg.b"}),
        frozenset({"pkg.c", "pkg.d"}),
    }
