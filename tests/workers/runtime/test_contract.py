"""Every worker package is on the worker contract (workers/runtime/contract.py), so the shape cannot drift.

- each `workers/NAME/__main__.py` declares `WORKER = WorkerSpec("NAME", build, <config model>)` and its
  `if __name__ == "__main__":` block is exactly `main_for(WORKER)`: one entry point, one way to load config;
- no `__main__.py` runs its own loop, exits by itself or reads its config (`load_section`, `load_*config`,
  `load_settings`, `run_worker`, `sys.exit`): the entry point does all of that;
- every class of a worker package that defines `process` subclasses the runtime's `Processor`;
- the runtime discovers nothing with getattr: what a processor offers is the contract's attributes.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from pydantic import BaseModel

from workers.runtime.app import WorkerSpec
from workers.runtime.contract import Processor

ROOT = Path(__file__).resolve().parents[3]
WORKERS = sorted(
    p.name for p in (ROOT / "workers").iterdir() if (p / "__main__.py").is_file() and p.name != "runtime"
)
FORBIDDEN_CALLS = {"load_section", "load_settings", "run_worker", "exit", "basicConfig", "ConsumerRuntime"}


def test_there_are_workers() -> None:
    assert len(WORKERS) >= 9 and "assembler" in WORKERS


def _main(name: str) -> ast.Module:
    return ast.parse((ROOT / "workers" / name / "__main__.py").read_text())


def _called(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


@pytest.mark.parametrize("name", WORKERS)
def test_the_entry_point_is_main_for_of_the_workers_spec(name: str) -> None:
    tree = _main(name)
    guards = [
        n
        for n in tree.body
        if isinstance(n, ast.If)
        and isinstance(n.test, ast.Compare)
        and ast.unparse(n.test) == "__name__ == '__main__'"
    ]
    assert len(guards) == 1, f"workers/{name}/__main__.py needs one `if __name__ == '__main__':` block"
    assert [ast.unparse(s) for s in guards[0].body] == ["main_for(WORKER)"]
    spec = importlib.import_module(f"workers.{name}.__main__").WORKER
    assert isinstance(spec, WorkerSpec) and spec.name == name
    assert isinstance(spec.config, type) and issubclass(spec.config, BaseModel)


@pytest.mark.parametrize("name", WORKERS)
def test_no_entry_point_loads_config_or_runs_a_loop_of_its_own(name: str) -> None:
    calls = {_called(n) for n in ast.walk(_main(name)) if isinstance(n, ast.Call)}
    own = {c for c in calls if c in FORBIDDEN_CALLS or (c.startswith("load_") and c.endswith("config"))}
    assert not own, f"workers/{name}/__main__.py calls {sorted(own)}: the shared entry point does that"


def _processor_classes() -> list[tuple[str, ast.ClassDef]]:
    found = []
    for path in sorted((ROOT / "workers").glob("*/*.py")):
        if path.parent.name == "runtime":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(f, ast.FunctionDef) and f.name == "process" for f in node.body
            ):
                found.append((f"{path.parent.name}/{path.name}:{node.name}", node))
    return found


def test_every_processor_is_on_the_contract() -> None:
    classes = _processor_classes()
    assert len(classes) >= len(WORKERS)
    off = [where for where, node in classes if "Processor" not in {ast.unparse(b) for b in node.bases}]
    assert not off, f"not subclasses of workers.runtime.contract.Processor: {off}"


def test_each_worker_builds_a_processor() -> None:
    """The return annotation of every build() names a Processor subclass (imported where it is cheap)."""
    for name in WORKERS:
        module = importlib.import_module(f"workers.{name}.__main__")
        returned = module.build.__annotations__["return"]
        owner = next(
            (
                p
                for p in (ROOT / "workers" / name).glob("*.py")
                if f"class {returned}(Processor)" in p.read_text()
            ),
            None,
        )
        assert owner is not None, f"workers/{name}: build() returns {returned}, which is not a Processor"
        if name == "faithfulness":
            continue  # its processor imports torch (the `ml` extra); the class check above covers it
        cls = getattr(importlib.import_module(f"workers.{name}.{owner.stem}"), returned)
        assert issubclass(cls, Processor) and cls.name == name


def test_the_runtime_finds_nothing_by_getattr() -> None:
    source = (ROOT / "workers" / "runtime" / "consumer.py").read_text()
    assert "getattr(" not in source
    assert "Readiness(True)" not in "".join(p.read_text() for p in (ROOT / "workers").glob("*/processor.py"))
