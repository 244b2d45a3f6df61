"""A tenant's probe sets in the review store's PostgreSQL (migration 0006): add, list, export, pin.

A probe file is JSON lines, one probe per line: {"set", "query_id", "query", "gold_ids"?}; `export`
writes the same form back, so a set can be kept in the app's repository and replayed from there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from service.contracts import vocabulary as L

_ID = re.compile(L.ID_PATTERN)
_NAME = re.compile(L.NAME_PATTERN)

_UPSERT = """
INSERT INTO probe_query (tenant, probe_set, query_id, query_text, gold_ids) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (tenant, probe_set, query_id) DO UPDATE SET query_text = EXCLUDED.query_text,
    gold_ids = EXCLUDED.gold_ids, added_at = now()
"""
_LIST = """
SELECT probe_set, query_id, query_text, gold_ids, added_at FROM probe_query
WHERE tenant = %s AND (%s::text IS NULL OR probe_set = %s) ORDER BY probe_set, query_id
"""
_PIN = """
INSERT INTO probe_baseline (tenant, probe_set, embedding_model, index_version, pinned_at, accepted_at, how)
VALUES (%s, %s, %s, %s, %s, now(), 'pinned')
ON CONFLICT (tenant, probe_set, embedding_model, index_version) DO UPDATE
SET pinned_at = EXCLUDED.pinned_at, accepted_at = now(), how = 'pinned'
"""


_BASELINES = """
SELECT probe_set, embedding_model, index_version, how, pinned_at, accepted_at FROM probe_baseline
WHERE tenant = %s ORDER BY probe_set, accepted_at DESC
"""


class ProbeFileError(ValueError):
    """A line of a probe file breaks a rule; the message names the line, the field and the rule."""


@dataclass(frozen=True)
class Probe:
    probe_set: str
    query_id: str
    query: str
    gold_ids: list[str] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"set": self.probe_set, "query_id": self.query_id, "query": self.query}
        if self.gold_ids is not None:
            out["gold_ids"] = self.gold_ids
        return out


def parse_probe(line_no: int, doc: Any) -> Probe:
    """One probe of a file, checked with the contract's rules for the trace's probe mark."""
    where = f"line {line_no}"
    if not isinstance(doc, dict):
        raise ProbeFileError(f"{where}: a probe is a JSON object with set, query_id, query and gold_ids")
    unknown = set(doc) - {"set", "query_id", "query", "gold_ids"}
    if unknown:
        raise ProbeFileError(
            f"{where}: unknown field {sorted(unknown)[0]!r} (set, query_id, query, gold_ids)"
        )
    probe_set, query_id, query, gold = (
        doc.get("set"),
        doc.get("query_id"),
        doc.get("query"),
        doc.get("gold_ids"),
    )
    if (
        not isinstance(probe_set, str)
        or not 0 < len(probe_set) <= L.MAX_NAME_LEN
        or not _NAME.match(probe_set)
    ):
        raise ProbeFileError(f"{where}: set must match {L.NAME_PATTERN}, 1 to {L.MAX_NAME_LEN} characters")
    if not isinstance(query_id, str) or not 0 < len(query_id) <= L.MAX_ID_LEN or not _ID.match(query_id):
        raise ProbeFileError(
            f"{where}: query_id must be an identifier ({L.ID_PATTERN}, up to {L.MAX_ID_LEN})"
        )
    if not isinstance(query, str) or not 0 < len(query) <= L.MAX_QUERY_CHARS:
        raise ProbeFileError(f"{where}: query must be text of 1 to {L.MAX_QUERY_CHARS} characters")
    if gold is not None:
        if not isinstance(gold, list) or len(gold) > L.MAX_GOLD_IDS:
            raise ProbeFileError(f"{where}: gold_ids must be a list of at most {L.MAX_GOLD_IDS} document ids")
        for g in gold:
            if not isinstance(g, str) or not 0 < len(g) <= L.MAX_ID_LEN or not _ID.match(g):
                raise ProbeFileError(f"{where}: gold_ids holds {g!r}, not a document id ({L.ID_PATTERN})")
    return Probe(probe_set, query_id, query, gold)


def add_probes(conn: psycopg.Connection, tenant: str, probes: Iterable[Probe]) -> int:
    """Register (or replace, by set and query id) the probes, in one transaction; how many."""
    rows = [(tenant, p.probe_set, p.query_id, p.query, p.gold_ids) for p in probes]
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(_UPSERT, rows)
    return len(rows)


def list_probes(conn: psycopg.Connection, tenant: str, probe_set: str | None = None) -> Iterator[Probe]:
    for s, q, text, gold, _added in conn.execute(_LIST, (tenant, probe_set, probe_set)):
        yield Probe(s, q, text, list(gold) if gold is not None else None)


def parse_version(text: str) -> tuple[str, str]:
    """`MODEL` or `MODEL@INDEX_VERSION` (docs/probes.md, "Versions") as (embedding model, index version)."""
    model, _, index = text.rpartition("@") if "@" in text else (text, "", "")
    if not model and not index:
        raise ValueError(f"{text!r}: a version is MODEL or MODEL@INDEX_VERSION")
    return model, index


def pin_baseline(
    conn: psycopg.Connection, tenant: str, probe_set: str, version: tuple[str, str], pinned_at: datetime
) -> None:
    """Pin the version's results from `pinned_at` on as the set's baseline (it becomes the current one)."""
    with conn.transaction():
        conn.execute(_PIN, (tenant, probe_set, version[0], version[1], pinned_at))


def baselines(conn: psycopg.Connection, tenant: str) -> list[tuple[str, str, str, str, datetime, datetime]]:
    """(set, embedding model, index version, how, pinned at, accepted at), each set's current one first."""
    return [tuple(row) for row in conn.execute(_BASELINES, (tenant,)).fetchall()]
