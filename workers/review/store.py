"""The sampler's writes to the review store, in one transaction per batch.

The batch's consumed offsets are kept in the same transaction (Kafka offsets
are committed after it): a batch redelivered after a crash finds its offsets
already applied and skips them, so an item, an overflow or a scored trace is
never counted twice, even where no unique key could tell.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any

import orjson
import psycopg
from psycopg.types.json import Jsonb

from workers.review.config import ReviewConfig
from workers.review.plan import NewItem, Plan
from workers.runtime.reviewstore import ReviewDbStore
from workers.runtime.types import Event

# Every write of a batch is one statement over arrays (unnest), whatever the number of items: a batch of 500
# traces costs the same few round trips to PostgreSQL as a batch of one.
_ITEM_COLUMNS = (
    "tenant",
    "trace_id",
    "stratum",
    "reason",
    "inclusion_probability",
    "queued_day",
    "trace_timestamp",
    "variant",
    "release",
    "intent",
    "content",
    "faithfulness_score",
    "faithfulness_threshold",
    "faithfulness_outcome",
    "scorer_version",
    "falsely_excluded",
    "exclusion_gold_source",
    "reviews_wanted",
    "policy_version",
    "config_version",
)
_ITEM_TYPES = (
    "text",
    "text",
    "text",
    "text",
    "float8",
    "date",
    "timestamptz",
    "text",
    "text",
    "text",
    "jsonb",
    "float8",
    "float8",
    "text",
    "text",
    "bool",
    "text",
    "int2",
    "text",
    "text",
)
_INSERT_ITEMS = (
    f"INSERT INTO review_item ({', '.join(_ITEM_COLUMNS)}) "
    f"SELECT * FROM unnest({', '.join(f'%b::{t}[]' for t in _ITEM_TYPES)}) "
    "ON CONFLICT (tenant, trace_id) DO NOTHING RETURNING tenant, trace_id"
)

_EXISTING = (
    "SELECT i.tenant, i.trace_id FROM review_item i JOIN unnest(%b::text[], %b::text[]) AS u(tenant, trace_id) "
    "ON i.tenant = u.tenant AND i.trace_id = u.trace_id"
)

# The day's quota rows of the batch's (tenant, stratum) pairs, created if new and locked: a concurrent
# sampler waits here, so the admitted count read is the one this transaction raises.
_QUOTA_ROWS = (
    "INSERT INTO review_quota (tenant, day, stratum) SELECT * FROM unnest(%b::text[], %b::date[], %b::text[]) "
    "ON CONFLICT DO NOTHING"
)
_QUOTA_LOCK = (
    "SELECT q.tenant, q.stratum, q.admitted FROM review_quota q "
    "JOIN unnest(%b::text[], %b::date[], %b::text[]) AS u(tenant, day, stratum) "
    "ON q.tenant = u.tenant AND q.day = u.day AND q.stratum = u.stratum "
    "ORDER BY q.tenant, q.stratum FOR UPDATE OF q"
)
_QUOTA_ADD = (
    "UPDATE review_quota q SET admitted = q.admitted + u.admitted, overflow = q.overflow + u.overflow "
    "FROM unnest(%b::text[], %b::date[], %b::text[], %b::int[], %b::bigint[]) "
    "AS u(tenant, day, stratum, admitted, overflow) "
    "WHERE q.tenant = u.tenant AND q.day = u.day AND q.stratum = u.stratum"
)
_TENANT_QUEUED = (
    "INSERT INTO review_tenant_stats AS s (tenant, queued) SELECT * FROM unnest(%b::text[], %b::bigint[]) "
    "ON CONFLICT (tenant) DO UPDATE SET queued = s.queued + EXCLUDED.queued"
)
_SCORE_TOTALS = (
    "INSERT INTO review_score_totals AS s (tenant, day, scored, predicted_faithful) "
    "SELECT * FROM unnest(%b::text[], %b::date[], %b::bigint[], %b::bigint[]) "
    "ON CONFLICT (tenant, day) DO UPDATE SET scored = s.scored + EXCLUDED.scored, "
    "predicted_faithful = s.predicted_faithful + EXCLUDED.predicted_faithful"
)

_ATTACH_FAITHFULNESS = """
UPDATE review_item i SET faithfulness_score = u.score, faithfulness_threshold = u.threshold,
    faithfulness_outcome = u.outcome, scorer_version = u.scorer
FROM unnest(%b::text[], %b::text[], %b::float8[], %b::float8[], %b::text[], %b::text[])
    AS u(tenant, trace_id, score, threshold, outcome, scorer)
WHERE i.tenant = u.tenant AND i.trace_id = u.trace_id
"""

_ATTACH_EXCLUSION = """
UPDATE review_item i SET falsely_excluded = u.excluded, exclusion_gold_source = u.source
FROM unnest(%b::text[], %b::text[], %b::bool[], %b::text[]) AS u(tenant, trace_id, excluded, source)
WHERE i.tenant = u.tenant AND i.trace_id = u.trace_id
"""

# Implicit signals of traces that have an item (queued before or in this batch), the first time each.
_SIGNALS = """
INSERT INTO review_signal AS s (tenant, trace_id, signal, first_at)
SELECT u.tenant, u.trace_id, u.signal, u.first_at
FROM unnest(%b::text[], %b::text[], %b::text[], %b::timestamptz[]) AS u(tenant, trace_id, signal, first_at)
WHERE EXISTS (SELECT 1 FROM review_item i WHERE i.tenant = u.tenant AND i.trace_id = u.trace_id)
ON CONFLICT (tenant, trace_id, signal) DO UPDATE SET first_at = LEAST(s.first_at, EXCLUDED.first_at)
"""


def _dumps(value: Any) -> str:
    """JSON text for a jsonb column. JSON and the contract allow U+0000 in any text, jsonb cannot hold it
    (`UntranslatableCharacter`, which the runtime would take for an outage and retry for ever): it is stored
    as U+FFFD, so the item keeps its place and shows where the character was."""
    text = orjson.dumps(value).decode()
    return orjson.dumps(_without_nul(value)).decode() if "\\u0000" in text else text


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nul(v) for v in value]
    return value


def _columns(rows: Iterable[tuple[Any, ...]]) -> tuple[list[Any], ...]:
    """Rows as one list per column: the parameters of an unnest(%b, %b, ...) statement."""
    return tuple(list(column) for column in zip(*rows, strict=True))


class Outcome:
    def __init__(self) -> None:
        self.queued: Counter[tuple[str, str]] = Counter()
        self.overflow: Counter[tuple[str, str]] = Counter()
        self.scored: Counter[str] = Counter()


class QueueStore(ReviewDbStore):
    def __init__(self, url: str, config: ReviewConfig, config_version: str) -> None:
        super().__init__(url)
        self.config = config
        self.config_version = config_version

    # -- offsets ----------------------------------------------------------------

    @staticmethod
    def claim(cur: psycopg.Cursor, events: list[Event]) -> list[Event]:
        """The events this transaction owns: those past the stored offsets (their rows locked)."""
        parts = sorted({(e.source.topic, e.source.partition) for e in events})
        if not parts:
            return []
        topics, partitions = [p[0] for p in parts], [p[1] for p in parts]
        cur.execute(
            "INSERT INTO review_consumer_offset (topic, partition, next_offset) "
            "SELECT t, p, 0 FROM unnest(%b::text[], %b::int[]) AS u(t, p) ON CONFLICT DO NOTHING",
            (topics, partitions),
        )
        cur.execute(
            "SELECT topic, partition, next_offset FROM review_consumer_offset o "
            "WHERE (topic, partition) IN (SELECT * FROM unnest(%b::text[], %b::int[])) "
            "ORDER BY topic, partition FOR UPDATE",
            (topics, partitions),
        )
        applied = {(t, p): o for t, p, o in cur.fetchall()}
        return [e for e in events if e.source.offset >= applied[(e.source.topic, e.source.partition)]]

    @staticmethod
    def advance(cur: psycopg.Cursor, events: list[Event]) -> None:
        last: dict[tuple[str, int], int] = {}
        for e in events:
            key = (e.source.topic, e.source.partition)
            last[key] = max(last.get(key, -1), e.source.offset)
        if last:
            cur.execute(
                "UPDATE review_consumer_offset o SET next_offset = GREATEST(o.next_offset, u.n) "
                "FROM unnest(%b::text[], %b::int[], %b::bigint[]) AS u(t, p, n) "
                "WHERE o.topic = u.t AND o.partition = u.p",
                _columns((*key, last[key] + 1) for key in sorted(last)),
            )

    # -- effects ----------------------------------------------------------------

    def apply(self, cur: psycopg.Cursor, plan: Plan) -> Outcome:
        outcome = Outcome()
        today = datetime.now(UTC).date()
        self._admit(cur, list(plan.items.values()), today, outcome)
        self._attach(cur, plan)
        self._record_signals(cur, plan)
        totals = sorted({(t, d) for t, d, _ in plan.score_totals})
        if totals:
            scored = [plan.score_totals[(t, d, "scored")] for t, d in totals]
            cur.execute(
                _SCORE_TOTALS,
                (
                    [t for t, _ in totals],
                    [d for _, d in totals],
                    scored,
                    [plan.score_totals[(t, d, "faithful")] for t, d in totals],
                ),
            )
            for (tenant, _), n in zip(totals, scored, strict=True):
                outcome.scored[tenant] += n
        return outcome

    def _admit(self, cur: psycopg.Cursor, items: list[NewItem], today: date, outcome: Outcome) -> None:
        """Queue what is new and fits the day's quota of its (tenant, stratum); count the rest as overflow.

        Within a batch, items are admitted in event order, so the first ones of a day fill its quota.
        """
        if not items:
            return
        cur.execute(_EXISTING, ([i.tenant for i in items], [i.trace_id for i in items]))
        existing = {(t, tr) for t, tr in cur.fetchall()}
        items = [i for i in items if (i.tenant, i.trace_id) not in existing]
        if not items:
            return
        keys = sorted({(i.tenant, i.stratum) for i in items})
        arrays = ([t for t, _ in keys], [today] * len(keys), [s for _, s in keys])
        cur.execute(_QUOTA_ROWS, arrays)
        cur.execute(_QUOTA_LOCK, arrays)
        room = {(t, s): self.config.quota(t, s) - admitted for t, s, admitted in cur.fetchall()}
        admitted: list[NewItem] = []
        overflow: Counter[tuple[str, str]] = Counter()
        for item in items:
            key = (item.tenant, item.stratum)
            if room[key] > 0:
                room[key] -= 1
                admitted.append(item)
            else:
                overflow[key] += 1
        inserted: set[tuple[str, str]] = set()
        if admitted:
            cur.execute(_INSERT_ITEMS, _columns(self._row(i, today) for i in admitted))
            inserted = {(t, tr) for t, tr in cur.fetchall()}  # less when another sampler queued one meanwhile
        queued: Counter[tuple[str, str]] = Counter(
            (i.tenant, i.stratum) for i in admitted if (i.tenant, i.trace_id) in inserted
        )
        cur.execute(
            _QUOTA_ADD,
            (
                [t for t, _ in keys],
                [today] * len(keys),
                [s for _, s in keys],
                [queued[k] for k in keys],
                [overflow[k] for k in keys],
            ),
        )
        per_tenant = Counter[str]()
        for (tenant, _), n in queued.items():
            per_tenant[tenant] += n
        if per_tenant:
            tenants = sorted(per_tenant)
            cur.execute(_TENANT_QUEUED, (tenants, [per_tenant[t] for t in tenants]))
        outcome.queued.update(queued)
        outcome.overflow.update(overflow)

    def _row(self, item: NewItem, today: date) -> tuple[object, ...]:
        f, x, c = item.faithfulness or {}, item.exclusion or {}, item.content
        return (
            item.tenant,
            item.trace_id,
            item.stratum,
            item.reason,
            item.inclusion_probability,
            today,
            item.trace_timestamp,
            c.get("variant", "production"),
            c.get("release"),
            c.get("intent"),
            Jsonb(c, dumps=_dumps),
            f.get("score"),
            f.get("threshold"),
            f.get("outcome"),
            f.get("scorer_version"),
            x.get("falsely_excluded"),
            x.get("gold_source"),
            item.reviews_wanted,
            self.config.policy_version,
            self.config_version,
        )

    @staticmethod
    def _record_signals(cur: psycopg.Cursor, plan: Plan) -> None:
        """The batch's feedback signals and those stashed with its new items, where an item exists."""
        first: dict[tuple[str, str, str], datetime] = {}
        rows = [*plan.signals]
        rows += [
            (i.tenant, i.trace_id, name, at) for i in plan.items.values() for name, at in i.signals.items()
        ]
        for tenant, trace_id, signal, at in rows:
            when = datetime.fromisoformat(at)
            key = (tenant, trace_id, signal)
            if key not in first or when < first[key]:
                first[key] = when  # one row per key: ON CONFLICT DO UPDATE cannot touch a row twice
        if first:
            cur.execute(_SIGNALS, _columns((*key, first[key]) for key in sorted(first)))

    @staticmethod
    def _attach(cur: psycopg.Cursor, plan: Plan) -> None:
        """Scores that arrive after their trace was queued (a blind item) are attached to it."""
        if plan.faithfulness:
            cur.execute(
                _ATTACH_FAITHFULNESS,
                _columns(
                    (
                        e.tenant,
                        e.trace_id,
                        e.score,
                        e.threshold,
                        e.outcome,
                        f"{e.model.source}@{e.model.revision[:12]}",
                    )
                    for e in plan.faithfulness
                ),
            )
        if plan.exclusions:
            cur.execute(
                _ATTACH_EXCLUSION,
                _columns((e.tenant, e.trace_id, e.falsely_excluded, e.gold_source) for e in plan.exclusions),
            )
