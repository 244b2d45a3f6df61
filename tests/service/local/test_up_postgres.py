"""`ragmon up` supervises its private PostgreSQL: kill -9 the postmaster, it comes back on the same port with
the same cluster, and the review page and the review worker work again."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from tests.service.local.test_up_supervisor import running_up
from tests.service.review.review_harness import signed_in
from tests.support.kafka import wait_until


def _page_works(client: object, path: str = "/review") -> bool:
    try:
        return client.get(path).status_code == 200  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - the API may answer an error while the store restarts
        return False


@pytest.mark.slow
def test_a_killed_postgres_is_restarted_and_the_review_page_works_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGMON_DATABASE_URL", raising=False)  # the private one, as `make run` does
    monkeypatch.delenv("RAGMON_API_KEYS", raising=False)  # so `ragmon up` makes a reviewer's key
    with running_up(tmp_path, "--workers", "review", "--max-crashes", "3", "--crash-window", "120") as up:
        found = re.search(r"Review\s+(http://\S+)/review\s+\(key (\S+),", up.text())
        assert found, up.text()
        wait_until(lambda: up.ok(up.worker + "/readyz"), 60, what="review worker ready (store migrated)")
        with signed_in(up.api, found.group(2)) as reviewer:
            assert _page_works(reviewer)
            postmaster = up.pid_of(r"pginstall/bin/postgres -D")
            os.kill(postmaster, signal.SIGKILL)
            wait_until(lambda: "postgres exited with -9" in up.text(), 15, what="the crash line")
            assert "lost: nothing committed" in up.text()
            wait_until(lambda: up.restarts("postgres") == 1, 60, what="postgres restarted")
            assert up.pid_of(r"pginstall/bin/postgres -D") != postmaster
            wait_until(lambda: _page_works(reviewer), 30, what="the review page after the restart")
            wait_until(lambda: up.ok(up.worker + "/readyz"), 30, what="the review worker after the restart")
        assert up.proc.poll() is None  # still up: a restart, not a reason to stop
