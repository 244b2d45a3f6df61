"""A real Phoenix server for the session (tests/support/phoenix.py), started on first use."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LOG_DIR
from tests.support.phoenix import PhoenixServer, PhoenixUnavailable, ensure_venv


@pytest.fixture(scope="session")
def phoenix() -> Iterator[PhoenixServer]:
    try:
        command = ensure_venv()
    except PhoenixUnavailable as exc:
        pytest.fail(str(exc))
    with tempfile.TemporaryDirectory(prefix="ragmon-phoenix-") as work:
        server = PhoenixServer(log_dir=LOG_DIR, working_dir=Path(work))
        try:
            server.start(command)
            yield server
        finally:
            server.stop()
