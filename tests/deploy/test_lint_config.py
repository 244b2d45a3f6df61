"""`make lint` and the pre-commit hooks run the same checks, and `make test` runs lint first."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def make_target(name: str) -> tuple[list[str], list[str]]:
    """The prerequisites and recipe lines of one Makefile target."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(rf"^{re.escape(name)}:(.*)$", line)
        if m:
            recipe = []
            for body in lines[i + 1 :]:
                if not body.startswith("\t"):
                    break
                recipe.append(body.strip())
            return m.group(1).split(), recipe
    raise AssertionError(f"Makefile has no target {name!r}")


def test_lint_runs_ruff_check_ruff_format_and_mypy() -> None:
    _, recipe = make_target("lint")
    commands = [line.replace("$(BIN)/", "") for line in recipe]
    assert any(c.startswith("ruff check ") for c in commands), commands
    assert any(c.startswith("ruff format --check ") for c in commands), commands
    assert any(c.startswith("mypy ") for c in commands), commands


def test_make_test_runs_lint_before_the_suite() -> None:
    prerequisites, _ = make_target("test")
    assert "lint" in prerequisites


def test_pre_commit_hooks_are_the_lint_recipe() -> None:
    _, recipe = make_target("lint")
    lint = sorted(line.replace("$(BIN)/", "") for line in recipe)
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    assert all(repo["repo"] == "local" for repo in config["repos"]), "hooks must not download anything"
    entries = sorted(hook["entry"].removeprefix(".venv/bin/") for hook in hooks)
    assert entries == lint
    assert all(hook["pass_filenames"] is False for hook in hooks), "each hook checks the whole tree"
