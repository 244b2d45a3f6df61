"""The `ragmon up` fixture on a machine without Prometheus: a clear failure, and nothing left running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.stack import start_up
from tests.support.leaks import live_descendants

HIDDEN = {"prometheus", "promtool", "prometheus-alertmanager", "alertmanager", "amtool"}


def path_without_prometheus(tmp_path: Path) -> str:
    """PATH as it is, except that the directories holding Prometheus are replaced by link farms without it."""
    entries = []
    for i, entry in enumerate(os.environ["PATH"].split(os.pathsep)):
        d = Path(entry)
        if not any((d / name).exists() for name in HIDDEN):
            entries.append(entry)
            continue
        farm = tmp_path / f"bin{i}"
        farm.mkdir()
        for tool in d.iterdir():
            if tool.name not in HIDDEN:
                (farm / tool.name).symlink_to(tool)
        entries.append(str(farm))
    return os.pathsep.join(entries)


@pytest.mark.slow
def test_up_without_prometheus_says_so_and_the_fixture_fails_clearly(tmp_path: Path) -> None:
    config = tmp_path / "ragmon.yaml"
    config.write_text("metrics: {}\n")
    before = set(live_descendants(os.getpid()))
    with pytest.raises(AssertionError) as failure:
        start_up(
            tmp_path,
            config,
            {"PATH": path_without_prometheus(tmp_path)},
            timeout_s=120,
            extra_args=("--workers", "metrics"),
        )
    message = str(failure.value)
    assert "printed no Prometheus URL" in message and "deploy/setup/host.sh" in message, message
    assert "Prometheus: not installed (make run installs it, or: apt-get install prometheus" in message, (
        message
    )
    assert set(live_descendants(os.getpid())) <= before, "the failed fixture left part of the stack running"
