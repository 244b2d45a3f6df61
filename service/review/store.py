"""The API's side of the review store: assignment, items, labels (with their outbox rows), progress."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from service.contracts.stored import stored_document

# Items offered to a reviewer stay theirs this long; after that another reviewer may take them.
DEFAULT_LEASE_S = 1800

_CLAIM_NEXT = """
SELECT i.id FROM review_item i
WHERE i.tenant = %(tenant)s AND i.reviews_done < i.reviews_wanted
  AND NOT EXISTS (SELECT 1 FROM review_label l WHERE l.item_id = i.id AND l.reviewer = %(reviewer)s)
  AND i.reviews_done + (SELECT count(*) FROM review_assignment a
                        WHERE a.item_id = i.id AND a.reviewer <> %(reviewer)s AND a.expires_at > now())
      < i.reviews_wanted
ORDER BY i.id LIMIT 1 FOR UPDATE OF i SKIP LOCKED
"""

_HELD = """
SELECT a.item_id FROM review_assignment a JOIN review_item i ON i.id = a.item_id
WHERE a.reviewer = %(reviewer)s AND i.tenant = %(tenant)s AND a.expires_at > now()
  AND NOT EXISTS (SELECT 1 FROM review_label l WHERE l.item_id = a.item_id AND l.reviewer = %(reviewer)s)
ORDER BY a.item_id LIMIT 1
"""

_SAVE_LABEL = """
INSERT INTO review_label AS l (item_id, tenant, trace_id, reviewer, faithful, answerable, gold_ids, reason, note,
    scorer_version, policy_version, config_version)
VALUES (%(item_id)s, %(tenant)s, %(trace_id)s, %(reviewer)s, %(faithful)s, %(answerable)s, %(gold_ids)s,
    %(reason)s, %(note)s, %(scorer)s, %(policy)s, %(config)s)
ON CONFLICT (item_id, reviewer) DO UPDATE SET faithful = EXCLUDED.faithful, answerable = EXCLUDED.answerable,
    gold_ids = EXCLUDED.gold_ids, reason = EXCLUDED.reason, note = EXCLUDED.note, labelled_at = now()
RETURNING id, (xmax = 0) AS inserted
"""


class ForeignItem(Exception):
    """The item belongs to another tenant."""


class NotAssigned(Exception):
    """The reviewer neither holds a live lease on the item nor labelled it before: not theirs to label."""


# A reviewer may save a label on an item leased to them (by next_item, unexpired) or change their own label.
_MAY_LABEL = """
SELECT EXISTS (SELECT 1 FROM review_assignment WHERE item_id = %(id)s AND reviewer = %(reviewer)s
               AND expires_at > now())
    OR EXISTS (SELECT 1 FROM review_label WHERE item_id = %(id)s AND reviewer = %(reviewer)s)
"""


@dataclass(frozen=True)
class LabelInput:
    faithful: bool
    answerable: bool | None
    gold_ids: list[str]
    reason: str | None
    note: str | None


@dataclass(frozen=True)
class Progress:
    labelled_today: int
    labelled_total: int
    waiting: int  # items of the tenant still wanting a review


def label_event(
    tenant: str, trace_id: str, reviewer: str, label: LabelInput, event_id: uuid.UUID, at: datetime
) -> dict[str, Any]:
    """The `label` event as the API stores it in Kafka (the same shape as an ingested one)."""
    body: dict[str, Any] = {"trace_id": trace_id, "faithful": label.faithful, "reviewer": reviewer}
    if label.answerable is not None:
        body["answerable"] = label.answerable
    if label.gold_ids:
        body["gold_ids"] = label.gold_ids
    if label.note:
        body["note"] = label.note
    ts = at.isoformat()
    return stored_document(str(event_id), "label", tenant, ts, ts, body)


class ReviewStore:
    def __init__(self, pool: ConnectionPool, lease_s: int = DEFAULT_LEASE_S) -> None:
        self.pool = pool
        self.lease_s = lease_s

    def next_item(self, tenant: str, reviewer: str) -> int | None:
        """The reviewer's held item, or the next open one (leased to them); None when the queue is empty."""
        args = {"tenant": tenant, "reviewer": reviewer, "lease": self.lease_s}
        with self.pool.connection() as conn, conn.transaction():
            held = conn.execute(_HELD, args).fetchone()
            if held:
                return int(held[0])
            row = conn.execute(_CLAIM_NEXT, args).fetchone()
            if row is None:
                return None
            conn.execute(
                "INSERT INTO review_assignment (item_id, reviewer, expires_at) "
                "VALUES (%(id)s, %(reviewer)s, now() + make_interval(secs => %(lease)s)) "
                "ON CONFLICT (item_id, reviewer) DO UPDATE SET expires_at = EXCLUDED.expires_at",
                {**args, "id": row[0]},
            )
            return int(row[0])

    def item(self, item_id: int, tenant: str, reviewer: str) -> dict[str, Any] | None:
        """The item and this reviewer's label of it (None if absent); ForeignItem for another tenant's."""
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute("SELECT * FROM review_item WHERE id = %s", (item_id,)).fetchone()
            if row is None:
                return None
            if row["tenant"] != tenant:
                raise ForeignItem(item_id)
            mine = cur.execute(
                "SELECT faithful, answerable, gold_ids, reason, note, labelled_at FROM review_label "
                "WHERE item_id = %s AND reviewer = %s",
                (item_id, reviewer),
            ).fetchone()
        row["my_label"] = mine
        return row

    def save_label(self, item_id: int, tenant: str, reviewer: str, label: LabelInput) -> uuid.UUID:
        """Label and its outbox row in one transaction; returns the label event's id.

        NotAssigned when the item is not leased to this reviewer and they have no label on it yet: without
        this, any reviewer of the tenant could label any item (past its reviews_wanted, or one a colleague
        holds), and a label's reviewer would not be who the queue gave the item to.
        """
        with self.pool.connection() as conn, conn.transaction():
            item = conn.execute(
                "SELECT tenant, trace_id, scorer_version, policy_version, config_version "
                "FROM review_item WHERE id = %s FOR UPDATE",
                (item_id,),
            ).fetchone()
            if item is None:
                raise KeyError(item_id)
            if item[0] != tenant:
                raise ForeignItem(item_id)
            allowed = conn.execute(_MAY_LABEL, {"id": item_id, "reviewer": reviewer}).fetchone()
            if not (allowed and allowed[0]):
                raise NotAssigned(item_id)
            saved = conn.execute(
                _SAVE_LABEL,
                {
                    "item_id": item_id,
                    "tenant": tenant,
                    "trace_id": item[1],
                    "reviewer": reviewer,
                    "faithful": label.faithful,
                    "answerable": label.answerable,
                    "gold_ids": label.gold_ids,
                    "reason": label.reason,
                    "note": label.note,
                    "scorer": item[2],
                    "policy": item[3],
                    "config": item[4],
                },
            ).fetchone()
            assert saved is not None
            label_id, inserted = saved
            if inserted:
                done = conn.execute(
                    "UPDATE review_item SET reviews_done = reviews_done + 1 WHERE id = %s "
                    "RETURNING reviews_done = reviews_wanted",
                    (item_id,),
                ).fetchone()
                if done and done[0]:
                    conn.execute(
                        "UPDATE review_tenant_stats SET completed = completed + 1 WHERE tenant = %s",
                        (tenant,),
                    )
            conn.execute(
                "DELETE FROM review_assignment WHERE item_id = %s AND reviewer = %s", (item_id, reviewer)
            )
            event_id = uuid.uuid4()
            event = label_event(tenant, item[1], reviewer, label, event_id, datetime.now(UTC))
            conn.execute(
                "INSERT INTO label_outbox (label_id, event_id, tenant, event) VALUES (%s, %s, %s, %s)",
                (label_id, event_id, tenant, Jsonb(event, dumps=lambda v: orjson.dumps(v).decode())),
            )
        return event_id

    def progress(self, tenant: str, reviewer: str) -> Progress:
        with self.pool.connection() as conn:
            mine = conn.execute(
                "SELECT count(*) FILTER (WHERE labelled_at >= date_trunc('day', now())), count(*) "
                "FROM review_label WHERE tenant = %s AND reviewer = %s",
                (tenant, reviewer),
            ).fetchone()
            waiting = conn.execute(
                "SELECT queued - completed FROM review_tenant_stats WHERE tenant = %s", (tenant,)
            ).fetchone()
        assert mine is not None
        return Progress(int(mine[0]), int(mine[1]), int(waiting[0]) if waiting else 0)

    def reviewers(self, tenant: str) -> list[tuple[str, int]]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT reviewer, count(*) FROM review_label WHERE tenant = %s GROUP BY reviewer "
                "ORDER BY reviewer",
                (tenant,),
            ).fetchall()
        return [(r[0], int(r[1])) for r in rows]


# How long a request waits for a connection before the store counts as down (a page answers 503): the
# pool's own default, 30 s, held a reviewer's request and an executor thread that long before a 500.
CONNECTION_WAIT_S = 5.0
# How long one reconnection attempt backs off (1 s doubling) before it is given up; the next request starts
# a new one at once. The pool's default, 300 s, let the backoff grow to minutes: pages stayed 503 for about
# as long again as PostgreSQL had been down.
RECONNECT_GIVE_UP_S = 10.0


def open_pool(url: str, max_size: int = 8) -> ConnectionPool:
    """A small pool; opened (and the schema migrated) by the caller at start."""
    try:
        # check: a connection is tested when handed out, so one broken by a PostgreSQL restart is replaced
        # instead of failing a reviewer's request.
        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            open=False,
            check=ConnectionPool.check_connection,
            timeout=CONNECTION_WAIT_S,
            reconnect_timeout=RECONNECT_GIVE_UP_S,
            kwargs={"autocommit": True, "connect_timeout": 5},
        )
        pool.open(wait=True, timeout=15)
    except psycopg.Error as exc:
        raise ConnectionError(f"cannot reach the review store (RAGMON_DATABASE_URL): {exc}") from exc
    return pool
