"""External tools the tests use, and what happens when one is missing.

`make test` runs `deploy/setup/host.sh test` (Debian packages, the npm type
checker, the alibi venv) and sets RAGMON_SETUP_DONE=1, so there a missing tool
is a failure, not a skip: the set-up had the chance to install it. Run by hand
without the set-up (or with CI set, as before), a missing tool skips with the
one command that installs it.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType

import pytest

SETUP_COMMAND = "bash deploy/setup/host.sh test"


def setup_was_run() -> bool:
    return bool(os.environ.get("RAGMON_SETUP_DONE") or os.environ.get("CI"))


def missing(what: str, command: str = SETUP_COMMAND) -> None:
    """Skip (or, after the set-up ran, fail) naming the one command that installs `what`."""
    if setup_was_run():
        pytest.fail(f"{what} is missing although the set-up ran: `{command}` should have installed it")
    pytest.skip(f"{what} not installed: `{command}` installs it (make test runs it)")


def require_tool(*names: str) -> str:
    """The path of the first of `names` on PATH."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    missing(" / ".join(names))
    raise AssertionError("unreachable: missing() skips or fails")


def require_module(name: str) -> ModuleType:
    """A Python module of the dev extra (`make install` installs it)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"Python module {name}", "make install")
        raise
