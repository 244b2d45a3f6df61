"""A worker's connection to the review database (service/contracts/reviewdb), and its readiness.

`database_url` is the URL a worker's `build()` needs, or the error naming it.
`ReviewDbStore` is what the review sampler's and the probes worker's stores
share: one connection, reopened when it was closed or broke; `batch()` is one
transaction, whose broken connection is closed so that the retry reconnects;
`migrate()` brings the schema up to date over a connection of its own.
`MigratedFirst` keeps such a worker not ready until its store migrated: a
down PostgreSQL is "not ready", retried every few seconds, never a crash loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg

from service.contracts import reviewdb
from service.contracts.config import ConfigError
from workers.runtime.types import READY, Readiness


def database_url(url: str | None, why: str) -> str:
    """The worker's RAGMON_DATABASE_URL; unset, a ConfigError saying `why` the worker needs PostgreSQL."""
    if not url:
        raise ConfigError(f"{reviewdb.DATABASE_ENV} is not set: {why} (`ragmon up` starts a private one)")
    return url


class ReviewDbStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.Connection | None = None

    def connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = reviewdb.connect(self.url, autocommit=False)
        return self._conn

    def migrate(self) -> None:
        with reviewdb.connect(self.url) as conn:
            reviewdb.migrate(conn)

    @contextmanager
    def batch(self) -> Iterator[psycopg.Cursor]:
        conn = self.connection()
        try:
            with conn.transaction(), conn.cursor() as cur:
                yield cur
        except psycopg.OperationalError:
            conn.close()  # a broken connection is reopened on the retry
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


class MigratedFirst:
    """Readiness: `migrate` tried at most every `retry_s` until it succeeded once; the last error is the reason."""

    def __init__(
        self, what: str, migrate: Callable[[], None], log: logging.Logger, retry_s: float = 5.0
    ) -> None:
        self._what = what
        self._migrate = migrate
        self._log = log
        self._retry_s = retry_s
        self.migrated = False
        self.next_try = 0.0
        self._error = "not checked yet"

    def readiness(self) -> Readiness:
        if not self.migrated and time.monotonic() >= self.next_try:
            self.next_try = time.monotonic() + self._retry_s
            try:
                self._migrate()
                self.migrated = True
            except (ConnectionError, psycopg.Error) as exc:
                self._error = str(exc)
                self._log.warning("%s not ready: %s", self._what, exc)
        return READY if self.migrated else Readiness(False, f"{self._what} unreachable: {self._error}")
