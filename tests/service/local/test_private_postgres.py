"""The private PostgreSQL of `ragmon up`: no TCP, a socket only its user reaches, passwords, no superuser app.

Before: initdb --auth=trust on 127.0.0.1:<port>, so any local user connected as superuser.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from service.local.embedded import ChildProcess
from service.local.postgres import APP_ROLE, _run_as, postgres_bin_dir, start_postgres
from service.local.secrets import SECRETS_FILE, load_or_create_secrets
from tests.conftest import LOG_DIR


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ragmon-pg-private-"))  # not tmp_path: see tests/conftest.py
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def server(workdir: Path) -> Iterator[ChildProcess]:
    child = start_postgres(workdir, log_dir=LOG_DIR, durable=False)
    try:
        yield child
    finally:
        child.stop()


def _without_password(url: str) -> str:
    params = {k: v for k, v in conninfo_to_dict(url).items() if v is not None and k != "password"}
    return psycopg.conninfo.make_conninfo("", **params)


@pytest.mark.slow
def test_nothing_listens_on_tcp_and_no_connection_without_the_password(server: ChildProcess) -> None:
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", server.port)) != 0
    for url in (server.extra["url"], server.extra["app_url"]):
        assert conninfo_to_dict(url)["host"].startswith("/")  # a socket directory, not a host name
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(_without_password(url), connect_timeout=5).close()


@pytest.mark.slow
def test_the_app_connects_as_a_role_that_is_no_superuser(server: ChildProcess) -> None:
    with psycopg.connect(server.extra["app_url"], autocommit=True) as conn:
        role = conn.execute(
            "SELECT rolname, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert role == (APP_ROLE, False, False, False)
        conn.execute("CREATE TABLE owned_by_app (id int)")  # its own database: it may run its migrations
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE DATABASE not_allowed")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("COPY owned_by_app FROM PROGRAM 'true'")


@pytest.mark.slow
def test_secrets_are_owner_only_and_never_on_a_command_line(server: ChildProcess, workdir: Path) -> None:
    secrets = load_or_create_secrets(workdir)
    assert (workdir / SECRETS_FILE).stat().st_mode & 0o777 == 0o600
    argv = Path(f"/proc/{server.pid}/cmdline").read_bytes().decode()
    for value in (secrets.postgres_superuser_password, secrets.postgres_app_password, secrets.review_secret):
        assert value not in argv and len(value) >= 32
    assert "listen_addresses=" in argv


@pytest.mark.slow
def test_a_cluster_made_with_trust_auth_is_hardened_on_its_next_start(workdir: Path) -> None:
    data = workdir / "pgdata"
    data.mkdir(mode=0o700)
    user = _run_as()
    if user is not None:
        shutil.chown(workdir, user)
        shutil.chown(data, user)
    subprocess.run(
        [str(postgres_bin_dir() / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres", "--no-sync"],
        check=True,
        capture_output=True,
        user=user,
        timeout=120,
    )
    child = start_postgres(workdir, log_dir=LOG_DIR, durable=False)
    try:
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(_without_password(child.extra["url"]), connect_timeout=5).close()
        with psycopg.connect(child.extra["url"]) as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
    finally:
        child.stop()
