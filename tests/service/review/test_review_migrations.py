"""The review store's migrations on real PostgreSQL: from empty, from the previous version, idempotent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from service.contracts import reviewdb
from tests.support.postgres import fresh_schema, system_postgres_reachable


@pytest.fixture(params=["pgserver", "system"])
def any_db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "pgserver":
        yield request.getfixturevalue("review_db_url")
        return
    if not system_postgres_reachable():
        pytest.skip("the machine's own PostgreSQL (127.0.0.1:5432, database test) is not reachable")
    with fresh_schema() as url:
        yield url


def _tables(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    ).fetchall()
    return {r[0] for r in rows}


@pytest.mark.slow
def test_migrate_from_empty(any_db_url: str) -> None:
    with reviewdb.connect(any_db_url) as conn:
        assert reviewdb.current_version(conn) == 0
        assert reviewdb.migrate(conn) == list(range(1, reviewdb.LATEST_VERSION + 1))
        assert reviewdb.current_version(conn) == reviewdb.LATEST_VERSION
        assert {
            "review_item",
            "review_label",
            "label_outbox",
            "review_assignment",
            "schema_migrations",
        } <= _tables(conn)
        assert reviewdb.migrate(conn) == []  # a second start applies nothing


@pytest.mark.slow
def test_migrate_from_previous_version_keeps_data(any_db_url: str) -> None:
    with reviewdb.connect(any_db_url) as conn:
        assert reviewdb.migrate(conn, target=reviewdb.LATEST_VERSION - 1) == list(
            range(1, reviewdb.LATEST_VERSION)
        )
        item = conn.execute(
            "INSERT INTO review_item (tenant, trace_id, stratum, reason, inclusion_probability, queued_day, "
            "trace_timestamp, variant, content) VALUES ('acme', 't1', 'blind', 'random', 0.1, current_date, now(), "
            "'production', '{}') RETURNING id"
        ).fetchone()
        assert item is not None
        conn.execute(
            "INSERT INTO review_label (item_id, tenant, trace_id, reviewer, faithful) "
            "VALUES (%s, 'acme', 't1', 'ann', true)",
            (item[0],),
        )
        assert reviewdb.migrate(conn) == [reviewdb.LATEST_VERSION]
        row = conn.execute("SELECT reviewer, faithful, scorer_version FROM review_label").fetchone()
        assert row == ("ann", True, None)


def test_unique_trace_per_tenant(review_db_url: str) -> None:
    with reviewdb.connect(review_db_url) as conn:
        reviewdb.migrate(conn)
        insert = (
            "INSERT INTO review_item (tenant, trace_id, stratum, reason, inclusion_probability, queued_day, "
            "trace_timestamp, variant, content) VALUES (%s, 't1', 'blind', 'random', 0.1, current_date, "
            "now(), 'production', '{}')"
        )
        conn.execute(insert, ("acme",))
        conn.execute(insert, ("globex",))  # another tenant's trace of the same id is another trace
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(insert, ("acme",))


def test_migration_names_are_checked(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1")
    (tmp_path / "0003_c.sql").write_text("SELECT 1")
    with pytest.raises(ValueError, match="without gaps"):
        reviewdb.migrations(tmp_path)
    (tmp_path / "bad.sql").write_text("SELECT 1")
    with pytest.raises(ValueError, match="NNNN_name.sql"):
        reviewdb.migrations(tmp_path)
