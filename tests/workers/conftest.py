"""Fixtures shared by the worker tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.workers import WorkerProcess


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """The worker processes a test starts (it appends each), stopped when it ends."""
    started: list[WorkerProcess] = []
    yield started
    for w in started:
        w.stop()
