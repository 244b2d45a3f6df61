"""Review-store databases for tests: a private PostgreSQL (pgserver), and the machine's own when reachable.

Each test gets a fresh database on the private server, or a fresh schema in
the machine's `test` database (never touching anything else there); both are
dropped afterwards.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from service.local.postgres import with_database

SYSTEM_URL = "postgresql://postgres@127.0.0.1:5432/test"


def system_postgres_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=0.5):
            pass
        with psycopg.connect(SYSTEM_URL, connect_timeout=2):
            return True
    except (OSError, psycopg.Error):
        return False


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    name = f"ragmon_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database(admin_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def fresh_schema(url: str = SYSTEM_URL) -> Iterator[str]:
    """A schema of our own in a shared database; the URL's search_path points there."""
    name = f"ragmon_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield f"{url}?options=-csearch_path%3D{name}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
