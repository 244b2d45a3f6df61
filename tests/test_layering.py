"""Imports run one way: workers -> service.contracts, and service never imports workers.

Checked on the source with `ast`, so a lazy import inside a function counts
as much as one at the top of a module. See docs/architecture.md ("Layering").
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.imports import ROOT, absolute_target, module_name


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted and absolute
    line: int


def _imports_of(path: Path) -> list[Import]:
    module = module_name(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = absolute_target(module, path.name == "__init__.py", node)
            found.append(Import(module, target, node.lineno))
            # `from service import contracts` imports service.contracts, not service alone.
            found += [Import(module, f"{target}.{alias.name}", node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call) and _is_import_module(node):
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append(Import(module, arg.value, node.lineno))
    return found


def _is_import_module(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in {"import_module", "__import__"} and bool(node.args)


def _package_imports(package: str) -> list[Import]:
    files = sorted((ROOT / package).rglob("*.py"))
    return [imp for path in files for imp in _imports_of(path)]


def _within(target: str, package: str) -> bool:
    return target == package or target.startswith(package + ".")


@pytest.fixture(scope="module")
def service_imports() -> list[Import]:
    found = _package_imports("service")
    modules = {imp.module for imp in found}
    # Cannot pass by reading nothing: the API, the contract and the CLI were parsed.
    assert {"service.api.app", "service.contracts.events", "service.cli"} <= modules
    return found


@pytest.fixture(scope="module")
def worker_imports() -> list[Import]:
    found = _package_imports("workers")
    modules = {imp.module for imp in found}
    assert {"workers.runtime.consumer", "workers.metrics.processor", "workers.drift.processor"} <= modules
    assert any(_within(imp.target, "service.contracts") for imp in found)
    return found


def _from_service_beyond_the_contract(imports: list[Import]) -> list[Import]:
    """The imports of a module of service other than service.contracts (and its modules)."""
    return [
        imp
        for imp in imports
        if _within(imp.target, "service")
        and imp.target != "service"
        and not _within(imp.target, "service.contracts")
    ]


def test_workers_import_only_the_contract_from_service(worker_imports: list[Import]) -> None:
    wrong = _from_service_beyond_the_contract(worker_imports)
    bare = [imp for imp in worker_imports if imp.target == "service"]
    assert wrong + bare == [], "workers may import only service.contracts from service"


def test_service_never_imports_workers(service_imports: list[Import]) -> None:
    wrong = [imp for imp in service_imports if _within(imp.target, "workers")]
    assert wrong == [], "service starts workers by module name, as their own process; it never imports them"


def test_the_contract_imports_nothing_else_from_service(service_imports: list[Import]) -> None:
    # Otherwise a worker would pull the API (or the simulator) in through the contract.
    contract = [imp for imp in service_imports if _within(imp.module, "service.contracts")]
    assert contract, "no module of service.contracts was parsed"
    wrong = _from_service_beyond_the_contract(contract)
    assert wrong == []


def test_relative_imports_are_resolved() -> None:
    # The checker itself: a relative import in a package __init__ and in a module.
    node = ast.parse("from .events import X\nfrom .. import api").body
    assert isinstance(node[0], ast.ImportFrom) and isinstance(node[1], ast.ImportFrom)
    assert absolute_target("service.contracts", True, node[0]) == "service.contracts.events"
    assert absolute_target("service.contracts.topics", False, node[0]) == "service.contracts.events"
    assert absolute_target("service.contracts.topics", False, node[1]) == "service"
