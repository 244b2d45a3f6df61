"""The committed dashboards type-check against Grafana's own types (npm @grafana/schema + tsc)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dashboards.typecheck import NODE_MODULES, committed_dashboards, typecheck
from tests.support.tools import missing, require_tool


@pytest.fixture(scope="module", autouse=True)
def _toolchain() -> None:
    require_tool("node")
    if not NODE_MODULES.is_dir():
        missing("dashboards/node_modules (the pinned type checker)")


@pytest.mark.slow
def test_committed_dashboards_type_check() -> None:
    paths = committed_dashboards()
    assert len(paths) == 9
    result = typecheck(paths)
    assert result.ok, result.output


def _broken(tmp_path: Path, name: str, spoil: Callable[[dict[str, Any]], None]) -> Path:
    board = json.loads(committed_dashboards()[0].read_text())
    spoil(next(p for p in board["panels"] if p["type"] != "row"))
    path = tmp_path / f"ragmon-{name}.json"
    path.write_text(json.dumps(board))
    return path


@pytest.mark.slow
def test_a_wrong_field_fails_the_type_check(tmp_path: Path) -> None:
    """The check can fail: an enum value Grafana does not know, a misspelt field, a panel without a query."""
    paths = [
        _broken(
            tmp_path, "enum", lambda p: p["fieldConfig"]["defaults"]["thresholds"].update(mode="absolut")
        ),
        _broken(tmp_path, "field", lambda p: p.update(titel=p.pop("title"))),
        _broken(tmp_path, "targets", lambda p: p.update(targets=[])),
    ]
    result = typecheck(paths)
    assert not result.ok
    assert '"absolut"' in result.output and "'titel'" in result.output.replace('"', "'")
    assert "Type '[]' is not assignable" in result.output
