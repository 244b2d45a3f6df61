"""Reading a module's imports from its source with `ast`: the helpers the import tests share."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_name(path: Path, root: Path = ROOT) -> str:
    """The dotted name of the module at `path` under `root` (a package's __init__ is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def absolute_target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute dotted module a `from ... import` in `module` names, relative levels resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)
