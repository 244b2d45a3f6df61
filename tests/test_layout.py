"""The test of a module is found by its name, or in one index (docs/conventions.md, "Tests and lint").

The tests of `a/b/c.py` (under service/, workers/, dashboards/) are `tests/a/b/test_c.py` or
`tests/a/b/test_b_c.py`; an entry point `a/b/__main__.py` counts as `main`. A module tested
elsewhere (through its caller, an end-to-end test, a file covering several modules) has an entry
under `[tested]` in tests/layout.toml naming the test files that exercise it; one no test reaches
is under `[untested]` with what would test it. Each listed test file must really refer to the
module: import it, or name it in a string (`python -m a.b.c`, `"a.b.c"`, `a/b/c.py`; the package
`a.b` for its `__main__`), or, with `via` (one file, or a chain from the test's side), refer to the
first file, each file to the next, and the last to the module. Tests that only read every module's
source (`STRUCTURAL`) are nobody's tests here. A failure prints the entry to add, found the same way.

Pure: the sources are read with `ast`, nothing is imported or started.
"""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache
from pathlib import Path

from tests.support.imports import ROOT, absolute_target, module_name

INDEX = ROOT / "tests" / "layout.toml"
NAME = "tests/layout.toml"  # as the failures name it
PACKAGES = ("service", "workers", "dashboards")
SUGGESTED = 3  # test files a suggested entry names, the closest first
MAX_VIA = 2  # files between a test and a module it reaches only through others
_DOTTED = re.compile(r"(?<![\w.])((?:service|workers|dashboards|tests)(?:\.\w+)+)")
_PATH = re.compile(r"(?<![\w/])((?:service|workers|dashboards|tests)(?:/\w+)+\.py)\b")


def modules() -> list[str]:
    """Every module of the three packages, as a path from the root (`service/api/app.py`)."""
    found = [
        p.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if p.name != "__init__.py" and "node_modules" not in p.parts
    ]
    return sorted(found)


def named_test_files(module: str) -> list[str]:
    """The test files the rule names for `module`: `tests/a/b/test_c.py`, `tests/a/b/test_b_c.py`."""
    path = Path(module)
    stem = "main" if path.stem == "__main__" else path.stem
    folder = Path("tests") / path.parent
    return [
        (folder / f"test_{stem}.py").as_posix(),
        (folder / f"test_{path.parent.name}_{stem}.py").as_posix(),
    ]


def has_named_test_file(module: str) -> bool:
    return any((ROOT / t).is_file() for t in named_test_files(module))


# Tests of the code's shape that read every module's source (imports, cycles, this index): they name
# modules without testing what those do, so they are no module's test here.
STRUCTURAL = (
    "tests/deploy/test_declared_imports.py",
    "tests/test_import_cycles.py",
    "tests/test_layering.py",
    "tests/test_layout.py",
)


@cache
def all_test_files() -> tuple[str, ...]:
    """Every test file that may be a module's: tests/**/test_*.py, less the structural ones."""
    found = (p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py"))
    return tuple(sorted(t for t in found if t not in STRUCTURAL))


@cache
def _resolve(dotted: str, *, exact: bool = False, run: bool = False) -> str | None:
    """The file a dotted name is (or starts with: `a.b.c.attr`): a module, a package's __init__.py,
    or, for a name that is run (`python -m a.b`), the package's __main__.py."""
    parts = dotted.split(".")
    whole = len(parts)
    while parts:
        base = ROOT.joinpath(*parts)
        for candidate in (
            base.with_suffix(".py"),
            base / "__main__.py" if run and len(parts) == whole else None,
            base / "__init__.py" if not run else None,
        ):
            if candidate is not None and candidate.is_file():
                return candidate.relative_to(ROOT).as_posix()
        if exact:
            return None
        parts.pop()
    return None


def _named_in(text: str) -> set[str | None]:
    """The files a string names: a dotted module (run, if a package) or a path."""
    found: set[str | None] = {_resolve(d, run=True) for d in _DOTTED.findall(text)}
    return found | {p for p in _PATH.findall(text) if (ROOT / p).is_file()}


@cache
def refers_to(file: str) -> frozenset[str]:
    """The files (paths from the root) that `file` imports or names in a string."""
    return _refers_in((ROOT / file).read_text(), file)


def _refers_in(source: str, file: str) -> frozenset[str]:
    path = ROOT / file
    tree = ast.parse(source, filename=file)
    here = module_name(path)
    found: set[str | None] = set()
    nodes = list(ast.walk(tree))
    # a bare string statement (a docstring) is prose, not a reference; an f-string is read whole below
    skip = {id(n.value) for n in nodes if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    skip |= {id(v) for n in nodes if isinstance(n, ast.JoinedStr) for v in n.values}
    words = {
        n.value
        for n in nodes
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier()
    }
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {_resolve(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            target = absolute_target(here, path.name == "__init__.py", node)
            found.add(_resolve(target))
            # `from workers.drift import views` imports the module workers.drift.views
            found |= {_resolve(f"{target}.{alias.name}", exact=True) for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found |= _named_in(node.value)
        elif isinstance(node, ast.JoinedStr):
            # f"workers.{name}" with `for name in ("forwarder", "phoenix")`: each word of the file filled in
            pieces = [str(v.value) if isinstance(v, ast.Constant) else None for v in node.values]
            if pieces.count(None) == 1 and _DOTTED.search("".join(p or "x" for p in pieces)):
                found |= {
                    n for w in words for n in _named_in("".join(p if p is not None else w for p in pieces))
                }
    return frozenset(m for m in found if m and m != file)


def _scope(module: str) -> list[str]:
    """Where a module's tests are looked for first: its named test folder, then its package's."""
    return [(Path("tests") / Path(module).parent).as_posix(), "tests/" + module.split("/")[0]]


def _closest(module: str, tests: list[str]) -> list[str]:
    """The `SUGGESTED` test files best placed to be a module's: same folder, its name in theirs, focused."""
    stem = Path(module).stem.strip("_")

    def rank(test: str) -> tuple[int, int, int, str]:
        folder = Path(test).parent.as_posix()
        near = next((i for i, s in enumerate(_scope(module)) if folder == s), 2)
        return (near, stem not in Path(test).stem, len(refers_to(test)), test)

    return sorted(sorted(tests, key=rank)[:SUGGESTED])


@cache
def _helpers() -> tuple[str, ...]:
    """Every file a test may reach a module through: the packages' files, and the tests' own helpers."""
    own = [p for p in (ROOT / "tests").rglob("*.py") if not p.name.startswith("test_")]
    files = [
        p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "node_modules" not in p.parts
    ]
    return tuple(sorted(p.relative_to(ROOT).as_posix() for p in files + own))


@cache
def _referrers(tests: bool) -> dict[str, list[str]]:
    """file -> the test files (or, not `tests`, the helper files) that refer to it."""
    found: dict[str, list[str]] = {}
    for referrer in all_test_files() if tests else _helpers():
        for file in refers_to(referrer):
            found.setdefault(file, []).append(referrer)
    return found


def referring_tests(file: str) -> list[str]:
    return _referrers(True).get(file, [])


def _chain_rank(module: str, chain: list[str]) -> tuple[int, int, int, list[str]]:
    """Which chain to a module to show: no package __init__ (it only re-exports), the module's own
    folder, the most tests."""
    inits = sum(Path(f).name == "__init__.py" for f in chain)
    away = sum(Path(f).parent != Path(module).parent for f in chain)
    return (inits, away, -len(referring_tests(chain[0])), chain)


def _path_to(module: str) -> list[str] | None:
    """The shortest chain of files from a test to `module` (`[via, ..., module]`), the nearest first."""
    chains = [[module]]
    seen = {module}
    for _ in range(MAX_VIA):
        chains = [
            [helper, *chain]
            for chain in chains
            for helper in _referrers(False).get(chain[0], [])
            if helper not in seen
        ]
        seen |= {chain[0] for chain in chains}
        tested = [c for c in chains if referring_tests(c[0])]
        if tested:
            return min(tested, key=lambda c: _chain_rank(module, c))
    return None


def suggestion(module: str) -> str:
    """The index line that would cover `module`, found by the same analysis the checks use."""
    direct = referring_tests(module)
    if direct:
        tests = ", ".join(f'"{t}"' for t in _closest(module, direct))
        return f'[tested] "{module}" = {{ tests = [{tests}] }}'
    chain = _path_to(module)
    if chain is None:
        return f'[untested] "{module}" = "<what would test it>"  (no test reaches it, {MAX_VIA} imports away)'
    tests = ", ".join(f'"{t}"' for t in _closest(module, referring_tests(chain[0])))
    via = chain[:-1]
    shown = f'"{via[0]}"' if len(via) == 1 else "[" + ", ".join(f'"{f}"' for f in via) + "]"
    through = (
        f"{via[0]}, which does" if len(via) == 1 else f"{via[0]}, which imports {via[1]}, which imports it"
    )
    reason = f"no test imports it; they reach it through {through}"
    return f'[tested] "{module}" = {{ tests = [{tests}], via = {shown}, reason = "{reason}" }}'


@cache
def index() -> dict[str, dict[str, object]]:
    return tomllib.loads(INDEX.read_text())


def _tested() -> dict[str, dict[str, object]]:
    return index().get("tested", {})  # type: ignore[return-value]


def _untested() -> dict[str, str]:
    return index().get("untested", {})  # type: ignore[return-value]


def test_the_index_has_only_its_two_tables() -> None:
    assert set(index()) <= {"tested", "untested"}, f"{NAME}: tables other than [tested], [untested]"
    both = sorted(set(_tested()) & set(_untested()))
    assert both == [], f"{NAME}: modules under both [tested] and [untested], keep one: {both}"
    for module, entry in _tested().items():
        assert isinstance(entry, dict) and set(entry) <= {"tests", "via", "reason"}, (
            f'{NAME} [tested] "{module}": an entry is {{ tests = [...], via = "...", reason = "..." }}'
        )
        assert "reason" in entry or "via" not in entry, f'{NAME} [tested] "{module}": a via needs a reason'
    for module, what in _untested().items():
        assert isinstance(what, str) and what.strip() and "<" not in what, (
            f'{NAME} [untested] "{module}": say what would test it'
        )


def test_every_module_has_its_named_test_file_or_an_index_entry() -> None:
    listed = set(_tested()) | set(_untested())
    missing = [m for m in modules() if m not in listed and not has_named_test_file(m)]
    advice = [f"{m}: add {named_test_files(m)[0]}, or to {NAME}: {suggestion(m)}" for m in missing]
    assert advice == [], "modules whose tests cannot be found by name:\n" + "\n".join(advice)


def test_every_index_entry_is_a_module_without_its_named_test_file() -> None:
    known = set(modules())
    wrong = []
    for table, entries in (("tested", _tested()), ("untested", _untested())):
        for module in entries:
            if module not in known:
                wrong.append(f'remove [{table}] "{module}" from {NAME}: no such module')
            elif has_named_test_file(module):
                named = next(t for t in named_test_files(module) if (ROOT / t).is_file())
                wrong.append(f'remove [{table}] "{module}" from {NAME}: {named} is its test now')
    assert wrong == [], "\n".join(wrong)


def _via(entry: dict[str, object]) -> list[str]:
    """An entry's `via` as a chain from the test's side: none, one file, or a list."""
    via = entry.get("via", [])
    return [via] if isinstance(via, str) else [str(v) for v in via]  # type: ignore[attr-defined]


def test_every_listed_test_file_exists_and_refers_to_the_module() -> None:
    wrong = []
    for module, entry in _tested().items():
        tests = entry.get("tests", [])
        assert isinstance(tests, list) and tests, f'{NAME} [tested] "{module}": name its test files'
        chain = [*_via(entry), module]
        broken = [
            f"{a} does not refer to {b}"
            for a, b in zip(chain, chain[1:], strict=False)
            if not (ROOT / a).is_file() or b not in refers_to(a)
        ]
        if broken:
            wrong.append(f'[tested] "{module}": via {"; ".join(broken)}; {suggestion(module)}')
            continue
        for test in tests:
            if not (str(test).startswith("tests/") and Path(test).name.startswith("test_")):
                wrong.append(f'[tested] "{module}": "{test}" is not a test file (tests/**/test_*.py)')
            elif test in STRUCTURAL:
                wrong.append(f'[tested] "{module}": remove "{test}", it reads sources, it tests no behaviour')
            elif not (ROOT / test).is_file():
                wrong.append(f'[tested] "{module}": remove "{test}", no such file; {suggestion(module)}')
            elif chain[0] not in refers_to(test):
                wrong.append(
                    f'[tested] "{module}": remove "{test}", it does not refer to {chain[0]}; {suggestion(module)}'
                )
    assert wrong == [], f"{NAME}:\n" + "\n".join(wrong)


def test_an_untested_module_is_reached_by_no_test() -> None:
    reached = [f"{m}: move it to {suggestion(m)}" for m in _untested() if referring_tests(m)]
    assert reached == [], f"{NAME}: [untested] modules a test now imports or names:\n" + "\n".join(reached)


def test_the_index_is_sorted() -> None:
    wrong = [
        f'[{table}]: "{b}" goes before "{a}"'
        for table, entries in index().items()
        for a, b in zip(list(entries), list(entries)[1:], strict=False)
        if b < a
    ]
    wrong += [
        f'[tested] "{m}": sort its tests and drop repeats'
        for m, e in _tested().items()
        if e.get("tests") != sorted(set(e.get("tests", [])))  # type: ignore[call-overload]
    ]
    assert wrong == [], f"{NAME}:\n" + "\n".join(wrong)


def test_references_are_read_from_imports_and_strings() -> None:
    """The reader itself: each way a test can refer to a module is found, and prose is not."""
    source = (
        '"""Mentions workers.shadow.power in prose only."""\n'
        "import service.contracts.events\n"
        "from workers.drift import views\n"
        "from workers.checks.answer import run_checks\n"
        "from .support import decoded\n"
        'CMD = ["python", "-m", "workers.metrics"]\n'
        'TARGET = "workers.runtime.labels.cap"\n'
        'PATH = "service/rules/render.py"\n'
        'STARTED = [f"workers.{name}" for name in ("forwarder", "nothing")]\n'
        'PROBE = ["python", "-m", "tests.workers.runtime.probe_worker"]\n'
    )
    assert _refers_in(source, "tests/test_probe.py") == {
        "service/contracts/events.py",
        "workers/drift/__init__.py",
        "workers/drift/views.py",
        "workers/checks/answer.py",
        "tests/support/__init__.py",
        "tests/support/decoded.py",
        "workers/metrics/__main__.py",
        "workers/runtime/labels.py",
        "service/rules/render.py",
        "workers/forwarder/__main__.py",
        "tests/workers/runtime/probe_worker.py",
    }


def test_a_missing_module_is_told_what_to_add() -> None:
    """The advice a failure prints, for a module tested through its caller and one started as a worker."""
    assert suggestion("service/simulate/encoder.py").startswith('[tested] "service/simulate/encoder.py" = {')
    assert "via = " in suggestion("service/simulate/encoder.py")
    assert "via" not in suggestion("workers/probes/__main__.py")
    assert named_test_files("workers/drift/__main__.py") == [
        "tests/workers/drift/test_main.py",
        "tests/workers/drift/test_drift_main.py",
    ]
