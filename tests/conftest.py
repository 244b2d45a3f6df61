"""Session-wide real servers: a Tansu broker and a private redis-server.

Both are started once per test session on free ports and stopped by PID at the
end. Tests that need to stop/restart them (broker down, Redis down) start
their own instances with the same helpers instead of touching these.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from service.local.embedded import ChildProcess, start_broker, start_redis
from tests.support.leaks import pytest_configure, pytest_sessionfinish  # noqa: F401 - hooks: no process outlives the run
from tests.support.slowmark import (  # noqa: F401 - hooks: the slow mark on every test that starts a process
    pytest_collection_modifyitems,
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_sessionstart,
)

# The alibi-detect parity test runs in its own venv (`make test` runs it after the suite,
# see tests/alibi/setup_venv.sh): in the main venv it is not collected rather than skipped.
collect_ignore = [] if importlib.util.find_spec("alibi_detect") else ["alibi"]

# Every stack a test starts (`ragmon up`, Prometheus) takes free ports, never its preferred fixed ones:
# tests and sessions running side by side would otherwise race for 8000, 9090, 9101...
os.environ["RAGMON_FREE_PORTS"] = "1"


LOG_DIR = Path(os.environ.get("RAGMON_TEST_LOGS", tempfile.gettempdir())) / "ragmon-test-logs"


@pytest.fixture(scope="session")
def broker() -> Iterator[ChildProcess]:
    child = start_broker(log_dir=LOG_DIR)
    yield child
    child.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(broker: ChildProcess) -> str:
    return f"127.0.0.1:{broker.port}"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[ChildProcess]:
    child = start_redis(log_dir=LOG_DIR)
    yield child
    child.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: ChildProcess) -> str:
    return f"redis://127.0.0.1:{redis_server.port}/0"


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def topic_prefix() -> str:
    """A fresh topic prefix per test, so tests sharing the broker never see each other's records."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[ChildProcess]:
    """A private PostgreSQL 16 from the pgserver wheel, for the review store.

    Its directory is not under pytest's tmp_path: pytest resets permissions
    there, which the unprivileged server (when tests run as root) must keep.
    """
    import shutil

    from service.local.postgres import start_postgres

    workdir = Path(tempfile.mkdtemp(prefix="ragmon-pg-"))
    child = start_postgres(workdir, log_dir=LOG_DIR, durable=False)
    try:
        yield child
    finally:
        child.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def review_db_url(postgres_server: ChildProcess) -> Iterator[str]:
    """A fresh, empty database on the private server (dropped afterwards)."""
    from tests.support.postgres import fresh_database

    with fresh_database(postgres_server.extra["url"]) as url:
        yield url
