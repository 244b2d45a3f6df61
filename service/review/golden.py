"""The golden set: reviewed items as JSON lines, stamped with what they were labelled under.

One line per reviewed item. Where two reviewers labelled it, both labels are
listed and the item-level `faithful`/`answerable` are their agreement (null
when they disagree: such items need an adjudicator before they gate a release).
Text was redacted by the API before it was queued; notes on the review page.

Each line carries what `ragmon golden split` and `ragmon gate` group and slice by: the trace's
`intent`, `variant`, `release` and `session_id` (null when the app sent none, or for items queued
before the review worker kept the session), the retrieved `candidates` (the exclusion sample's,
when the app sent one) beside the `documents` given to the generator.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg

_ROWS = """
SELECT i.id, i.trace_id, i.stratum, i.reason, i.inclusion_probability, i.content, i.scorer_version,
       i.policy_version, i.config_version,
       json_agg(json_build_object('reviewer', l.reviewer, 'faithful', l.faithful, 'answerable', l.answerable,
                'gold_ids', l.gold_ids, 'reason', l.reason, 'note', l.note, 'labelled_at', l.labelled_at,
                'scorer_version', l.scorer_version, 'policy_version', l.policy_version,
                'config_version', l.config_version) ORDER BY l.labelled_at, l.id)
FROM review_item i JOIN review_label l ON l.item_id = i.id
WHERE i.tenant = %s GROUP BY i.id ORDER BY i.id
"""


def _agreed(labels: list[dict[str, Any]], field: str) -> Any:
    values = {label[field] for label in labels if label[field] is not None}
    return values.pop() if len(values) == 1 else None


def golden_rows(conn: psycopg.Connection, tenant: str) -> Iterator[dict[str, Any]]:
    with conn.cursor(name="golden_export") as cur:  # server-side cursor: the set can be large
        cur.execute(_ROWS, (tenant,))
        for item_id, trace_id, stratum, reason, probability, content, scorer, policy, config, labels in cur:
            gold = sorted({g for label in labels for g in (label["gold_ids"] or [])})
            yield {
                "tenant": tenant,
                "item_id": item_id,
                "trace_id": trace_id,
                "query": content.get("query"),
                "documents": content.get("documents", []),
                "candidates": content.get("candidates", []),
                "answer": content.get("answer"),
                "refused": content.get("refused", False),
                "citations": content.get("citations", []),
                "faithful": _agreed(labels, "faithful"),
                "answerable": _agreed(labels, "answerable"),
                "gold_ids": gold,
                "labels": labels,
                "intent": content.get("intent"),
                "variant": content.get("variant"),
                "release": content.get("release"),
                "session_id": content.get("session_id"),
                "stratum": stratum,
                "queue_reason": reason,
                "inclusion_probability": probability,
                "versions": {"scorer": scorer, "policy": policy, "config": config},
            }
