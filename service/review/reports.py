"""Calibration reports read from the review store: judge vs people, people vs people, the faithful rate.

Each item counts once: where two reviewers labelled it, the judge is compared
with the first label, and the two labels feed the reviewer-vs-reviewer kappa.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import orjson
import psycopg
from psycopg.types.json import Jsonb

from service.contracts.config import ConfigError, load_config_file
from service.review.calibrate import DEFAULT_MAX_INTERVAL_WIDTH, Scored, calibrate
from service.review.refusals import (
    DEFAULT_MAX_FALSE_ANSWERS,
    DEFAULT_MIN_LABELS,
    RefusalItem,
    refusal_report,
)
from service.review.signals import DEFAULT_MIN_LABELS as DEFAULT_MIN_SIGNAL_LABELS
from service.review.signals import SignalItem, signal_report, verdict
from service.review.stats import (
    Confusion,
    cohen_kappa,
    prediction_powered_rate,
    weighted_rate,
    weighted_share,
    wilson,
)


def proxy_threshold_from_config() -> float | None:
    """The exclusion proxy's configured relevance threshold (RAGMON_CONFIG), for its calibration."""
    try:
        section = load_config_file().get("exclusion") or {}
    except ConfigError:
        return None
    value = section.get("proxy_score_threshold") if isinstance(section, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# π of an item: its inclusion probability, times the share of its (tenant, day, stratum) that fit the
# day's capacity (the rest overflowed, so the capacity is one more stage of sampling).
_PI = "i.inclusion_probability * coalesce(q.admitted::float8 / nullif(q.admitted + q.overflow, 0), 1.0)"

_FIRST_LABELS = f"""
SELECT DISTINCT ON (l.item_id) l.item_id, i.trace_id, i.stratum, i.faithfulness_score, i.faithfulness_threshold,
    i.faithfulness_outcome, l.faithful, l.gold_ids, i.content, {_PI}
FROM review_label l JOIN review_item i ON i.id = l.item_id
LEFT JOIN review_quota q ON q.tenant = i.tenant AND q.day = i.queued_day AND q.stratum = i.stratum
WHERE l.tenant = %s ORDER BY l.item_id, l.labelled_at, l.id
"""


def _weight(pi: float | None) -> float:
    return 1.0 / float(pi) if pi and pi > 0 else 1.0


def _first_labels(conn: psycopg.Connection, tenant: str) -> list[tuple[Any, ...]]:
    return conn.execute(_FIRST_LABELS, (tenant,)).fetchall()


def faithfulness_report(
    conn: psycopg.Connection, tenant: str, max_width: float = DEFAULT_MAX_INTERVAL_WIDTH
) -> dict[str, Any]:
    rows = [
        r for r in _first_labels(conn, tenant) if r[5] == "scored" and r[3] is not None and r[6] is not None
    ]
    items = [Scored(r[1], float(r[3]), bool(r[6]), _weight(r[9]), r[2]) for r in rows]
    configured = float(rows[-1][4]) if rows and rows[-1][4] is not None else None
    return calibrate("faithfulness", items, configured, max_width).as_dict()


def exclusion_proxy_report(
    conn: psycopg.Connection,
    tenant: str,
    configured: float | None,
    max_width: float = DEFAULT_MAX_INTERVAL_WIDTH,
) -> dict[str, Any]:
    """The proxy calls a candidate gold when its retrieval score clears a threshold: check it per document."""
    items: list[Scored] = []
    for _, trace_id, stratum, *_rest, gold_ids, content, pi in _first_labels(conn, tenant):
        gold = set(gold_ids or [])
        seen: set[str] = set()
        for doc in [*content.get("documents", []), *content.get("candidates", [])]:
            if doc.get("score") is not None and doc["id"] not in seen:
                seen.add(doc["id"])
                items.append(
                    Scored(
                        f"{trace_id}/{doc['id']}",
                        float(doc["score"]),
                        doc["id"] in gold,
                        _weight(pi),
                        stratum,
                    )
                )
    return calibrate("exclusion_proxy", items, configured, max_width).as_dict()


def reviewers_report(conn: psycopg.Connection, tenant: str) -> dict[str, Any]:
    rows = conn.execute(
        """
        SELECT item_id, array_agg(faithful ORDER BY labelled_at, id) FROM review_label
        WHERE tenant = %s AND faithful IS NOT NULL GROUP BY item_id HAVING count(*) >= 2""",
        (tenant,),
    ).fetchall()
    first = [bool(r[1][0]) for r in rows]
    second = [bool(r[1][1]) for r in rows]
    kappa = cohen_kappa(Confusion.of(first, second))
    return {"kind": "reviewers", "n": len(rows), "kappa": asdict(kappa) if kappa else None}


def faithful_rate_report(conn: psycopg.Connection, tenant: str, days: int = 30) -> dict[str, Any]:
    """Prediction-powered faithful rate of production, beside the raw judge rate.

    Unlabelled side: every scored production trace of the window (totals kept by
    the sampler). Labelled side: blind-sample items (a uniform random subset)
    with a score and a human `faithful` label.
    """
    totals = conn.execute(
        "SELECT coalesce(sum(scored), 0), coalesce(sum(predicted_faithful), 0) "
        "FROM review_score_totals WHERE tenant = %s AND day > current_date - %s",
        (tenant, days),
    ).fetchone()
    assert totals is not None
    scored, passed = int(totals[0]), int(totals[1])
    labelled = [
        (bool(r[6]), float(r[3]) >= float(r[4]))
        for r in _first_labels(conn, tenant)
        if r[2] == "blind" and r[5] == "scored" and r[3] is not None and r[4] is not None and r[6] is not None
    ]
    estimate = prediction_powered_rate(scored, passed, labelled)
    raw = wilson(passed, scored)
    return {
        "kind": "faithful_rate",
        "days": days,
        "scored": scored,
        "raw_rate": passed / scored if scored else None,
        "raw_interval": asdict(raw) if raw else None,
        "ppi_rate": estimate.value,
        "ppi_interval": asdict(estimate.interval) if estimate.interval else None,
        "labelled": estimate.n,
        "reweighted": reweighted_rate(conn, tenant, days),
    }


_WEIGHTED = f"""
SELECT DISTINCT ON (l.item_id) l.faithful, {_PI}, i.stratum
FROM review_label l JOIN review_item i ON i.id = l.item_id
LEFT JOIN review_quota q ON q.tenant = i.tenant AND q.day = i.queued_day AND q.stratum = i.stratum
WHERE l.tenant = %s AND l.faithful IS NOT NULL AND i.queued_day > current_date - %s
ORDER BY l.item_id, l.labelled_at, l.id
"""


def reweighted_rate(conn: psycopg.Connection, tenant: str, days: int) -> dict[str, Any]:
    """Every stratum's labels weighted by 1/π (Hajek), with the stratified weighted-bootstrap interval
    (`interval`), the linearised one beside it, and the unweighted share of the same labels."""
    rows = [
        (bool(y), float(p), s)
        for y, p, s in conn.execute(_WEIGHTED, (tenant, days)).fetchall()
        if p and p > 0
    ]
    estimate = weighted_rate([(y, p) for y, p, _ in rows])
    boot = weighted_share([y for y, _, _ in rows], [1.0 / p for _, p, _ in rows], [s for _, _, s in rows])
    positive = sum(1 for y, _, _ in rows if y)
    plain = wilson(positive, len(rows))
    return {
        "rate": estimate.value,
        "interval": asdict(boot.interval) if boot.interval else None,
        "interval_linearised": asdict(estimate.interval) if estimate.interval else None,
        "effective_n": boot.effective_n,
        "labelled": estimate.n,
        "unweighted_rate": positive / len(rows) if rows else None,
        "unweighted_interval": asdict(plain) if plain else None,
    }


_ANSWERABLE_LABELS = f"""
SELECT DISTINCT ON (l.item_id) i.trace_id, i.stratum, l.answerable, i.content, {_PI}
FROM review_label l JOIN review_item i ON i.id = l.item_id
LEFT JOIN review_quota q ON q.tenant = i.tenant AND q.day = i.queued_day AND q.stratum = i.stratum
WHERE l.tenant = %s AND l.answerable IS NOT NULL ORDER BY l.item_id, l.labelled_at, l.id
"""


def _confidence(content: dict[str, Any]) -> float | None:
    """The best retrieval score among the documents the generator was given (None without scores)."""
    scores = [d.get("score") for d in content.get("documents") or [] if isinstance(d, dict)]
    numbers = [float(s) for s in scores if isinstance(s, int | float) and not isinstance(s, bool)]
    return max(numbers) if numbers else None


def refusals_report(
    conn: psycopg.Connection,
    tenant: str,
    max_false_answers: float = DEFAULT_MAX_FALSE_ANSWERS,
    min_labels: int = DEFAULT_MIN_LABELS,
) -> dict[str, Any]:
    """The app's refusals against the first reviewer's `answerable` label of each item (service/review/refusals.py)."""
    items = [
        RefusalItem(
            trace_id,
            bool(content.get("refused")),
            bool(answerable),
            _confidence(content),
            _weight(pi),
            stratum,
        )
        for trace_id, stratum, answerable, content, pi in conn.execute(
            _ANSWERABLE_LABELS, (tenant,)
        ).fetchall()
    ]
    return refusal_report(items, max_false_answers, min_labels)


# Blind items with their first label and the implicit signals recorded for their trace.
_BLIND_SIGNALS = f"""
SELECT DISTINCT ON (l.item_id) i.trace_id, l.faithful, l.reason, {_PI},
    coalesce((SELECT array_agg(s.signal) FROM review_signal s
              WHERE s.tenant = i.tenant AND s.trace_id = i.trace_id), '{{}}')
FROM review_label l JOIN review_item i ON i.id = l.item_id
LEFT JOIN review_quota q ON q.tenant = i.tenant AND q.day = i.queued_day AND q.stratum = i.stratum
WHERE l.tenant = %s AND i.stratum = 'blind' ORDER BY l.item_id, l.labelled_at, l.id
"""


def signals_report(
    conn: psycopg.Connection, tenant: str, min_labels: int = DEFAULT_MIN_SIGNAL_LABELS
) -> dict[str, Any]:
    """Each implicit signal against the first reviewer's verdict of each blind item (service/review/signals.py)."""
    items = []
    for trace_id, faithful, reason, pi, found in conn.execute(_BLIND_SIGNALS, (tenant,)).fetchall():
        wrong = verdict(faithful, reason)
        if wrong is not None:
            items.append(SignalItem(trace_id, wrong, frozenset(found), _weight(pi)))
    return signal_report(items, min_labels)


def all_reports(
    conn: psycopg.Connection, tenant: str, proxy_threshold: float | None
) -> dict[str, dict[str, Any]]:
    return {
        "faithfulness": faithfulness_report(conn, tenant),
        "exclusion_proxy": exclusion_proxy_report(conn, tenant, proxy_threshold),
        "reviewers": reviewers_report(conn, tenant),
        "faithful_rate": faithful_rate_report(conn, tenant),
    }


def store_reports(conn: psycopg.Connection, tenant: str, reports: dict[str, dict[str, Any]]) -> None:
    """Kept so the review worker can export the latest figures as metrics."""
    with conn.transaction():
        for kind, result in reports.items():
            conn.execute(
                "INSERT INTO calibration_result (tenant, kind, result) VALUES (%s, %s, %s)",
                (tenant, kind, Jsonb(result, dumps=lambda v: orjson.dumps(v).decode())),
            )
