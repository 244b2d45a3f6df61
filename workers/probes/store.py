"""The probes worker's reads and writes in the review store's PostgreSQL (migration 0006, docs/probes.md).

A batch is one transaction: results and release markers are inserted once per event id (a redelivered
batch changes nothing), versions are accepted as baselines, and the comparison is read back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

from workers.runtime.reviewstore import ReviewDbStore

PRODUCTION = "production"

_INSERT_RESULTS = (
    "INSERT INTO probe_result (tenant, event_id, probe_set, query_id, variant, embedding_model, index_version, "
    "retrieved_ids, observed_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
_INSERT_CHANGE = (
    "INSERT INTO probe_change (tenant, event_id, release, variant, changed_at) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT DO NOTHING RETURNING tenant"
)

# Accept a version as a baseline: the set's first version, or one whose first production result follows a
# release of the tenant made after the set's current baseline was accepted, at most `window` seconds before
# that first result (an old release of something else declares nothing) and up to `grace` seconds after it.
_ACCEPT = """
INSERT INTO probe_baseline (tenant, probe_set, embedding_model, index_version, pinned_at, accepted_at, how)
SELECT %(t)s, %(s)s, %(m)s, %(i)s, f.first_seen, f.first_seen,
       CASE WHEN cur.accepted_at IS NULL THEN 'first' ELSE 'declared' END
FROM (SELECT min(observed_at) AS first_seen FROM probe_result
      WHERE tenant = %(t)s AND probe_set = %(s)s AND embedding_model = %(m)s AND index_version = %(i)s
        AND variant = 'production') f,
     (SELECT max(accepted_at) AS accepted_at FROM probe_baseline WHERE tenant = %(t)s AND probe_set = %(s)s) cur
WHERE f.first_seen IS NOT NULL AND (cur.accepted_at IS NULL OR EXISTS (
    SELECT 1 FROM probe_change c WHERE c.tenant = %(t)s AND c.changed_at > cur.accepted_at
      AND c.changed_at <= f.first_seen + %(grace)s * interval '1 second'
      AND c.changed_at >= f.first_seen - %(window)s * interval '1 second'))
ON CONFLICT DO NOTHING
"""

_UNACCEPTED = """
SELECT r.probe_set, r.embedding_model, r.index_version, min(r.observed_at) AS first_seen FROM probe_result r
WHERE r.tenant = %s AND r.variant = 'production' AND NOT EXISTS (
    SELECT 1 FROM probe_baseline b WHERE b.tenant = r.tenant AND b.probe_set = r.probe_set
      AND b.embedding_model = r.embedding_model AND b.index_version = r.index_version)
GROUP BY 1, 2, 3 ORDER BY first_seen DESC LIMIT 32
"""
# At most the 32 newest versions a tenant has not had accepted are looked at per batch: a tenant naming a new
# index version on every replay costs its own batches a bounded amount, not the shared worker a growing one.

_SERVING = """
SELECT embedding_model, index_version FROM probe_result
WHERE tenant = %s AND probe_set = %s AND variant = 'production' ORDER BY observed_at DESC, id DESC LIMIT 1
"""

_REFERENCE = """
SELECT embedding_model, index_version, pinned_at, how FROM probe_baseline WHERE tenant = %(t)s AND probe_set = %(s)s
ORDER BY (embedding_model = %(m)s AND index_version = %(i)s) DESC, accepted_at DESC LIMIT 1
"""

# Each probe's latest production result of the serving version, beside its baseline result (the first of the
# reference version at or after pinned_at) and its registered gold.
_COMPARE = """
WITH latest AS (
    SELECT DISTINCT ON (query_id) query_id, retrieved_ids FROM probe_result
    WHERE tenant = %(t)s AND probe_set = %(s)s AND variant = 'production'
      AND embedding_model = %(m)s AND index_version = %(i)s
    ORDER BY query_id, observed_at DESC, id DESC),
base AS (
    SELECT DISTINCT ON (query_id) query_id, retrieved_ids FROM probe_result
    WHERE tenant = %(t)s AND probe_set = %(s)s AND variant = 'production'
      AND embedding_model = %(rm)s AND index_version = %(ri)s AND observed_at >= %(pinned)s
    ORDER BY query_id, observed_at, id)
SELECT l.query_id, l.retrieved_ids, b.retrieved_ids, q.gold_ids
FROM latest l LEFT JOIN base b USING (query_id)
LEFT JOIN probe_query q ON q.tenant = %(t)s AND q.probe_set = %(s)s AND q.query_id = l.query_id
ORDER BY l.query_id
"""


@dataclass(frozen=True)
class Result:
    tenant: str
    event_id: str
    probe_set: str
    query_id: str
    variant: str
    embedding_model: str
    index_version: str
    retrieved_ids: list[str]
    observed_at: datetime


@dataclass(frozen=True)
class Change:
    tenant: str
    event_id: str
    release: str
    variant: str
    changed_at: datetime


@dataclass(frozen=True)
class Reference:
    embedding_model: str
    index_version: str
    pinned_at: datetime
    how: str


@dataclass(frozen=True)
class Compared:
    query_id: str
    current: list[str]
    baseline: list[str] | None  # None: the probe has no result of the reference version yet
    gold: list[str] | None


class ProbeStore(ReviewDbStore):
    def __init__(self, url: str, declare_grace_s: float, declare_window_s: float = 86400.0) -> None:
        super().__init__(url)
        self.grace = declare_grace_s
        self.window = declare_window_s

    def add(self, cur: psycopg.Cursor, results: list[Result], changes: list[Change]) -> set[str]:
        """Store the batch; the tenants that got a new release marker."""
        if results:
            cur.executemany(
                _INSERT_RESULTS,
                [
                    (
                        r.tenant,
                        r.event_id,
                        r.probe_set,
                        r.query_id,
                        r.variant,
                        r.embedding_model,
                        r.index_version,
                        r.retrieved_ids,
                        r.observed_at,
                    )
                    for r in results
                ],
            )
        declared: set[str] = set()
        for c in changes:
            cur.execute(_INSERT_CHANGE, (c.tenant, c.event_id, c.release, c.variant, c.changed_at))
            if cur.fetchone() is not None:
                declared.add(c.tenant)
        return declared

    def accept(self, cur: psycopg.Cursor, tenant: str) -> None:
        """Accept as baselines the tenant's versions that are first or declared, oldest first."""
        rows = cur.execute(_UNACCEPTED, (tenant,)).fetchall()
        for probe_set, model, index, _first_seen in reversed(rows):  # oldest first
            key = {"t": tenant, "s": probe_set, "m": model, "i": index}
            cur.execute(_ACCEPT, {**key, "grace": self.grace, "window": self.window})

    def serving(self, cur: psycopg.Cursor, tenant: str, probe_set: str) -> tuple[str, str] | None:
        row = cur.execute(_SERVING, (tenant, probe_set)).fetchone()
        return None if row is None else (row[0], row[1])

    def compare(
        self, cur: psycopg.Cursor, tenant: str, probe_set: str, version: tuple[str, str]
    ) -> tuple[Reference | None, list[Compared]]:
        model, index = version
        key = {"t": tenant, "s": probe_set, "m": model, "i": index}
        row = cur.execute(_REFERENCE, key).fetchone()
        if row is None:
            return None, []
        ref = Reference(*row)
        rows = cur.execute(
            _COMPARE, {**key, "rm": ref.embedding_model, "ri": ref.index_version, "pinned": ref.pinned_at}
        ).fetchall()
        return ref, [Compared(q, list(cur_ids), base, gold) for q, cur_ids, base, gold in rows]
