"""The review store's schema: shared by the review worker (queue writer) and the API (labels).

Plain numbered SQL files applied in order and recorded in `schema_migrations`
(docs/review.md says why not an ORM/Alembic). Every migration runs in its own
transaction under an advisory lock, so two processes starting at once apply
each file exactly once.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

DATABASE_ENV = "RAGMON_DATABASE_URL"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# Any constant shared by every ragmon process; pg_advisory_xact_lock takes a bigint.
_LOCK_KEY = 0x7261676D6F6E  # "ragmon"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    found = []
    for path in sorted(directory.glob("*.sql")):
        match = _NAME.match(path.name)
        if match is None:
            raise ValueError(f"{path.name}: migration files are named NNNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path.read_text()))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"migration versions must run 1..n without gaps, got {versions}")
    return found


LATEST_VERSION = len(migrations())


def current_version(conn: psycopg.Connection) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
        row = cur.fetchone()
        if not row or not row[0]:
            return 0
        cur.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
        found = cur.fetchone()
        return int(found[0]) if found else 0


def migrate(conn: psycopg.Connection, target: int | None = None) -> list[int]:
    """Apply every migration above the current version (up to `target`); return the versions applied."""
    applied: list[int] = []
    target = LATEST_VERSION if target is None else target
    for m in migrations():
        if m.version > target:
            break
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            cur.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version integer PRIMARY KEY, name text NOT NULL, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cur.execute("SELECT 1 FROM schema_migrations WHERE version = %s", (m.version,))
            if cur.fetchone():
                continue
            cur.execute(m.sql.encode())
            cur.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (m.version, m.name))
            applied.append(m.version)
    return applied


def url_from_env() -> str:
    """The review store's URL for a `ragmon` command: RAGMON_DATABASE_URL, or an exit saying it is not set."""
    url = os.environ.get(DATABASE_ENV)
    if not url:
        raise SystemExit(f"{DATABASE_ENV} is not set: point it at the review store's PostgreSQL")
    return url


def connect(url: str, *, autocommit: bool = True) -> psycopg.Connection:
    """A connection to the review store; fails with the variable to fix when it cannot connect."""
    try:
        return psycopg.connect(url, autocommit=autocommit, connect_timeout=5)
    except psycopg.OperationalError as exc:
        raise ConnectionError(f"cannot connect to the review store (RAGMON_DATABASE_URL): {exc}") from exc
