"""The sampler's writes to the review store, in one transaction per batch.

The batch's consumed offsets are kept in the same transaction (Kafka offsets
are committed after it): a batch redelivered after a crash finds its offsets
already applied and skips them, so an item, an overflow or a scored trace is
never counted twice, even where no unique key could tell.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import orjson
import psycopg
from psycopg.types.json import Jsonb

from service.contracts import reviewdb
from workers.review.config import ReviewConfig
from workers.review.plan import NewItem, Plan
from workers.runtime.types import Event

_INSERT_ITEM = """
INSERT INTO review_item (tenant, trace_id, stratum, reason, inclusion_probability, queued_day, trace_timestamp,
    variant, release, intent, content, faithfulness_score, faithfulness_threshold, faithfulness_outcome,
    scorer_version, falsely_excluded, exclusion_gold_source, reviews_wanted, policy_version, config_version)
VALUES (%(tenant)s, %(trace_id)s, %(stratum)s, %(reason)s, %(p)s, %(day)s, %(ts)s, %(variant)s, %(release)s,
    %(intent)s, %(content)s, %(f_score)s, %(f_threshold)s, %(f_outcome)s, %(scorer)s, %(x_excluded)s,
    %(x_source)s, %(reviews)s, %(policy)s, %(config)s)
ON CONFLICT (tenant, trace_id) DO NOTHING RETURNING id
"""

_ATTACH_FAITHFULNESS = """
UPDATE review_item i SET faithfulness_score = u.score, faithfulness_threshold = u.threshold,
    faithfulness_outcome = u.outcome, scorer_version = u.scorer
FROM unnest(%s::text[], %s::text[], %s::float8[], %s::float8[], %s::text[], %s::text[])
    AS u(tenant, trace_id, score, threshold, outcome, scorer)
WHERE i.tenant = u.tenant AND i.trace_id = u.trace_id
"""

_ATTACH_EXCLUSION = """
UPDATE review_item i SET falsely_excluded = u.excluded, exclusion_gold_source = u.source
FROM unnest(%s::text[], %s::text[], %s::bool[], %s::text[]) AS u(tenant, trace_id, excluded, source)
WHERE i.tenant = u.tenant AND i.trace_id = u.trace_id
"""


class Outcome:
    def __init__(self) -> None:
        self.queued: Counter[tuple[str, str]] = Counter()
        self.overflow: Counter[tuple[str, str]] = Counter()
        self.scored: Counter[str] = Counter()


class QueueStore:
    def __init__(self, url: str, config: ReviewConfig, config_version: str) -> None:
        self.url = url
        self.config = config
        self.config_version = config_version
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
            conn.close()  # reconnect on the retry
            raise

    # -- offsets ----------------------------------------------------------------

    @staticmethod
    def claim(cur: psycopg.Cursor, events: list[Event]) -> list[Event]:
        """The events this transaction owns: those past the stored offsets (their rows locked)."""
        parts = sorted({(e.source.topic, e.source.partition) for e in events})
        if not parts:
            return []
        topics, partitions = [p[0] for p in parts], [p[1] for p in parts]
        cur.execute("INSERT INTO review_consumer_offset (topic, partition, next_offset) "
                    "SELECT t, p, 0 FROM unnest(%s::text[], %s::int[]) AS u(t, p) ON CONFLICT DO NOTHING",
                    (topics, partitions))
        cur.execute("SELECT topic, partition, next_offset FROM review_consumer_offset o "
                    "WHERE (topic, partition) IN (SELECT * FROM unnest(%s::text[], %s::int[])) "
                    "ORDER BY topic, partition FOR UPDATE", (topics, partitions))
        applied = {(t, p): o for t, p, o in cur.fetchall()}
        return [e for e in events if e.source.offset >= applied[(e.source.topic, e.source.partition)]]

    @staticmethod
    def advance(cur: psycopg.Cursor, events: list[Event]) -> None:
        last: dict[tuple[str, int], int] = {}
        for e in events:
            key = (e.source.topic, e.source.partition)
            last[key] = max(last.get(key, -1), e.source.offset)
        if last:
            keys = sorted(last)
            cur.execute("UPDATE review_consumer_offset o SET next_offset = GREATEST(o.next_offset, u.n) "
                        "FROM unnest(%s::text[], %s::int[], %s::bigint[]) AS u(t, p, n) "
                        "WHERE o.topic = u.t AND o.partition = u.p",
                        ([k[0] for k in keys], [k[1] for k in keys], [last[k] + 1 for k in keys]))

    # -- effects ----------------------------------------------------------------

    def apply(self, cur: psycopg.Cursor, plan: Plan) -> Outcome:
        outcome = Outcome()
        today = datetime.now(UTC).date()
        for item in plan.items.values():
            result = self._admit(cur, item, today)
            if result == "queued":
                outcome.queued[(item.tenant, item.stratum)] += 1
            elif result == "overflow":
                outcome.overflow[(item.tenant, item.stratum)] += 1
        self._attach(cur, plan)
        totals = sorted({(t, d) for t, d, _ in plan.score_totals})
        for tenant, day in totals:
            scored = plan.score_totals[(tenant, day, "scored")]
            cur.execute("INSERT INTO review_score_totals AS s (tenant, day, scored, predicted_faithful) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT (tenant, day) DO UPDATE SET "
                        "scored = s.scored + EXCLUDED.scored, "
                        "predicted_faithful = s.predicted_faithful + EXCLUDED.predicted_faithful",
                        (tenant, day, scored, plan.score_totals[(tenant, day, "faithful")]))
            outcome.scored[tenant] += scored
        return outcome

    def _admit(self, cur: psycopg.Cursor, item: NewItem, today: object) -> str:
        cur.execute("SELECT 1 FROM review_item WHERE tenant = %s AND trace_id = %s", (item.tenant, item.trace_id))
        if cur.fetchone():
            return "exists"
        key = (item.tenant, today, item.stratum)
        cur.execute("INSERT INTO review_quota (tenant, day, stratum) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING", key)
        cur.execute("UPDATE review_quota SET admitted = admitted + 1 WHERE tenant = %s AND day = %s AND stratum = %s "
                    "AND admitted < %s RETURNING admitted", (*key, self.config.quota(item.tenant, item.stratum)))
        if cur.fetchone() is None:
            cur.execute("UPDATE review_quota SET overflow = overflow + 1 WHERE tenant = %s AND day = %s "
                        "AND stratum = %s", key)
            return "overflow"
        cur.execute(_INSERT_ITEM, self._row(item, today))
        if cur.fetchone() is None:  # another sampler queued it between our check and insert
            cur.execute("UPDATE review_quota SET admitted = admitted - 1 WHERE tenant = %s AND day = %s "
                        "AND stratum = %s", key)
            return "exists"
        cur.execute("INSERT INTO review_tenant_stats AS s (tenant, queued) VALUES (%s, 1) "
                    "ON CONFLICT (tenant) DO UPDATE SET queued = s.queued + 1", (item.tenant,))
        return "queued"

    def _row(self, item: NewItem, today: object) -> dict[str, object]:
        f, x, c = item.faithfulness or {}, item.exclusion or {}, item.content
        return {"tenant": item.tenant, "trace_id": item.trace_id, "stratum": item.stratum, "reason": item.reason,
                "p": item.inclusion_probability, "day": today, "ts": item.trace_timestamp,
                "variant": c.get("variant", "production"), "release": c.get("release"), "intent": c.get("intent"),
                "content": Jsonb(c, dumps=lambda v: orjson.dumps(v).decode()),
                "f_score": f.get("score"), "f_threshold": f.get("threshold"), "f_outcome": f.get("outcome"),
                "scorer": f.get("scorer_version"), "x_excluded": x.get("falsely_excluded"),
                "x_source": x.get("gold_source"), "reviews": item.reviews_wanted,
                "policy": self.config.policy_version, "config": self.config_version}

    @staticmethod
    def _attach(cur: psycopg.Cursor, plan: Plan) -> None:
        """Scores that arrive after their trace was queued (a blind item) are attached to it."""
        if plan.faithfulness:
            fs = plan.faithfulness
            cur.execute(_ATTACH_FAITHFULNESS, (
                [e.tenant for e in fs], [e.trace_id for e in fs], [e.score for e in fs], [e.threshold for e in fs],
                [e.outcome for e in fs], [f"{e.model.source}@{e.model.revision[:12]}" for e in fs]))
        if plan.exclusions:
            xs = plan.exclusions
            cur.execute(_ATTACH_EXCLUSION, ([e.tenant for e in xs], [e.trace_id for e in xs],
                                            [e.falsely_excluded for e in xs], [e.gold_source for e in xs]))
